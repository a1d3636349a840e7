"""What the ``sprites`` provider declares: its adapter and its settings (scope ``sprites``).

Read by the central places (:mod:`managoat_sandbox._declared`); the adapter
reads the settings at call time through :mod:`.settings`.
"""

from __future__ import annotations

from ..._declared import Declaration, Setting
from ..._setting_rules import POSITIVE_MS, boolean, credential, http_url

DECLARATION = Declaration(
    name="sprites",
    label="Sprites",
    adapter="Sprites",
    settings={
        "token": Setting(credential, env="SPRITES_TOKEN", shown=False),
        "base_url": Setting(
            http_url(optional=False),
            default="https://api.sprites.dev",
            env="SPRITES_BASE_URL",
            shown=False,
        ),
        "timeout_ms": Setting(POSITIVE_MS, default=30000),
        "policy_timeout_ms": Setting(POSITIVE_MS, default=90000),
        "public_urls": Setting(boolean, default=True),
        "checkpoint_creation_enabled": Setting(boolean, default=False),
    },
)
