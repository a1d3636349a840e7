"""What the ``daytona`` provider declares: its adapter and its settings (scope ``daytona``).

Read by the central places (:mod:`managoat_sandbox._declared`); the adapter
reads the settings at call time through :mod:`.settings`.
"""

from __future__ import annotations

from ..._declared import Declaration, Setting
from ..._setting_rules import credential, http_url, plain_text

DECLARATION = Declaration(
    name="daytona",
    label="Daytona",
    adapter="Daytona",
    settings={
        "api_key": Setting(credential, env="DAYTONA_API_KEY", shown=False),
        "api_url": Setting(
            http_url(optional=False),
            default="https://app.daytona.io/api",
            env="DAYTONA_API_URL",
            shown=False,
        ),
        "snapshot": Setting(plain_text(optional=True)),
        "organization_id": Setting(credential),
    },
)
