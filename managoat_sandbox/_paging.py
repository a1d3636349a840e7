"""The one pagination walker every provider's listing uses.

A listing is complete, or it is ``Truncated``: a part is never passed off as
the whole. :func:`walk` asks a provider's ``fetch`` for one page at a time,
from the cursor the previous page gave, and stops when a page gives none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

import attrs

from .errors import Truncated
from .reasons import Reason

__all__ = ["Page", "walk"]

T = TypeVar("T")


@attrs.frozen
class Page(Generic[T]):
    """One page: its ``items``, the ``cursor`` to fetch the next page with (``None``
    or empty when there is none) and whether the provider said there is ``more``
    (by default: exactly when there is a cursor)."""

    items: Sequence[T]
    cursor: str | None = None
    more: bool = attrs.field()

    @more.default
    def _more_when_a_cursor_is_given(self) -> bool:
        return bool(self.cursor)


def walk(
    fetch: Callable[[str | None], Page[T]],
    max_pages: int,
    *,
    cap_reason: Reason | str = Reason.PAGES,
) -> list[T]:
    """Every item of every page, fetching at most ``max_pages`` pages.

    ``fetch(None)`` is the first page, ``fetch(cursor)`` the next. Raises
    ``Truncated((cap_reason, max_pages))`` (by default ``("pages", max_pages)``)
    when the cap is reached with more to come,
    ``Truncated(("has_more_without_token", n))`` when a page says there is more
    but gives no cursor to fetch it with (``n`` items seen so far) and
    ``Truncated(("max_pages", max_pages))`` for a cap below one. ``cap_reason`` is
    a :class:`~managoat_sandbox.reasons.Reason` (or its value).
    """
    if max_pages < 1:
        raise Truncated(Reason.MAX_PAGES, limit=max_pages)
    items: list[T] = []
    cursor: str | None = None
    for _ in range(max_pages):
        page = fetch(cursor)
        items.extend(page.items)
        if not page.more:
            return items
        if not page.cursor:
            raise Truncated(Reason.HAS_MORE_WITHOUT_TOKEN, count=len(items))
        cursor = page.cursor
    raise Truncated(Reason(cap_reason), limit=max_pages)
