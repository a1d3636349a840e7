"""What the ``local`` provider declares: its adapter and its settings (scope ``local``).

Read by the central places (:mod:`managoat_sandbox._declared`); the adapter
reads the settings at call time through :mod:`.settings`.
"""

from __future__ import annotations

from ..._declared import Declaration, Setting
from ..._setting_rules import ISOLATION_MODES, byte_count, choice, count, host_path, host_pins

DECLARATION = Declaration(
    name="local",
    label="local",
    adapter="Local",
    settings={
        "root": Setting(host_path, env="MANAGOAT_SANDBOX_LOCAL_ROOT"),
        "isolation": Setting(
            choice(ISOLATION_MODES), default="auto", env="MANAGOAT_SANDBOX_LOCAL_ISOLATION"
        ),
        "egress_hosts": Setting(host_pins),
        "retained_sessions": Setting(count(0), default=100),
        "retained_bytes": Setting(byte_count, default=256 * 1024 * 1024),
    },
)
