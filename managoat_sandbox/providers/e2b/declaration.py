"""What the ``e2b`` provider declares: its adapter and its settings (scope ``e2b``).

Read by the central places (:mod:`managoat_sandbox._declared`); the adapter
reads the settings at call time through :mod:`.settings`.
"""

from __future__ import annotations

from ..._declared import Declaration, Setting
from ..._setting_rules import POSITIVE_MS, credential, http_url, plain_text

DECLARATION = Declaration(
    name="e2b",
    label="E2B",
    adapter="E2B",
    settings={
        "api_key": Setting(credential, env="E2B_API_KEY", shown=False),
        "base_url": Setting(
            http_url(optional=False),
            default="https://api.e2b.app",
            env="E2B_BASE_URL",
            shown=False,
        ),
        "sandbox_url": Setting(http_url(optional=True), env="E2B_SANDBOX_URL", shown=False),
        "template": Setting(plain_text(optional=False), default="base"),
        "user": Setting(plain_text(optional=False), default="user"),
        "timeout_ms": Setting(POSITIVE_MS, default=30000),
    },
)
