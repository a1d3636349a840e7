"""Sprites' timestamps: RFC 3339 text (any fraction of a second) or unix seconds."""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone

__all__ = ["timestamp"]

_FRACTION = re.compile(r"(\.\d{1,6})\d*")


def timestamp(value: object) -> datetime | None:
    """An RFC 3339 string or unix seconds as a datetime (aware unless the text has no
    offset); None if neither. Fractions finer than microseconds are cut."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        if math.isnan(value) or math.isinf(value):
            return None
        try:
            return datetime.fromtimestamp(value, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        text = _FRACTION.sub(lambda match: match.group(1).ljust(7, "0"), text, count=1)
        try:
            return datetime.fromisoformat(text)
        except ValueError:
            return None
    return None
