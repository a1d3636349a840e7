"""The E2B adapter's settings (declared in :mod:`.declaration`), read from config scope
``e2b`` at call time: :func:`load`."""

from __future__ import annotations

import hashlib
import ipaddress
import os
from urllib.parse import urlsplit

import attrs

from ... import config
from ..._http import endpoint
from ..._settings import ProviderSettings
from ...errors import Invalid
from ...reasons import Reason
from .declaration import DECLARATION

__all__ = ["ENVD_PORT", "SETTINGS", "Settings", "load"]

SETTINGS = ProviderSettings(DECLARATION.name, DECLARATION.label)

#: The port envd listens on inside every sandbox.
ENVD_PORT = 49983


@attrs.frozen
class Settings:
    """One call's view of config scope ``e2b`` (docs/protocols/e2b.md#configuration).

    ``api_key`` never appears in ``repr``. ``timeout`` is ``timeout_ms`` in
    seconds: the receive timeout of every non-streaming request and the bound
    on waiting for a command's ``start`` event. ``account`` names the account
    the key opens without revealing it (a SHA-256 digest of the key), worked
    out once per settings read.
    """

    api_key: str = attrs.field(repr=False)
    base_url: str
    template: str
    user: str
    timeout: float
    sandbox_url: str | None
    account: str = attrs.field(
        init=False,
        repr=False,
        eq=False,
        default=attrs.Factory(
            lambda s: hashlib.sha256(s.api_key.encode("utf-8")).hexdigest(), takes_self=True
        ),
    )

    @property
    def http_timeout(self) -> tuple[float, float]:
        """``(connect, read)`` seconds for a non-streaming request."""
        return (self.timeout, self.timeout)

    def default_domain(self) -> str:
        """The sandbox domain implied by ``base_url``: its host without a leading ``api.``."""
        host = urlsplit(self.base_url).hostname or "e2b.app"
        return host[4:] if host.startswith("api.") else host

    def check_envd_address(self) -> None:
        """``Invalid`` (saying which setting to set) when envd could not be addressed
        without a domain from the sandbox's answer.

        Without ``sandbox_url`` envd is ``https://49983-<id>.<domain>``, and a
        ``base_url`` whose host is an IP address or ``localhost`` (an emulator,
        a self-hosted API) implies no domain a sandbox label can be put in front
        of: the first command would fail on an address that cannot exist.
        """
        if self.sandbox_url:
            return
        host = urlsplit(self.base_url).hostname or ""
        if not _is_local_host(host):
            return
        raise Invalid(
            Reason.CONFIG,
            scope=SETTINGS.scope,
            key="sandbox_url",
            message=f"e2b sandbox_url is not set and base_url ({endpoint(self.base_url)}) names no "
            "sandbox domain, so envd (where commands run) cannot be addressed: set e2b "
            "sandbox_url or the E2B_SANDBOX_URL environment variable to envd's base URL "
            "(for the emulator, the same URL as base_url)",
        )

    def envd_url(self, sandbox_id: str, domain: str | None) -> str:
        """Where envd of ``sandbox_id`` is reached: ``sandbox_url`` if set, else
        ``https://49983-<id>.<domain>`` (the sandbox's domain, else the default;
        ``Invalid`` from :meth:`check_envd_address` when there is neither)."""
        if self.sandbox_url:
            return self.sandbox_url
        if not domain:
            self.check_envd_address()
        return f"https://{ENVD_PORT}-{sandbox_id}.{domain or self.default_domain()}"


def _is_local_host(host: str) -> bool:
    """Whether ``host`` is an IP address or ``localhost`` (no DNS domain of its own)."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


@attrs.frozen
class _Read:
    """What :func:`load` read, and what it came from: the configuration's ``version``
    and the environment variables it fell back on (``env``: name, value)."""

    version: int
    env: tuple[tuple[str, str | None], ...] = attrs.field(repr=False)  # may hold the key
    settings: Settings

    def current(self) -> bool:
        """Whether the configuration and those variables are still what they were."""
        return self.version == config.version() and all(
            os.environ.get(name) == value for name, value in self.env
        )


_last: _Read | None = None


def load() -> Settings:
    """Read the scope now; a missing API key is ``Denied`` naming ``E2B_API_KEY``, a URL
    or ``timeout_ms`` that cannot be used is ``Invalid`` (both through
    :class:`~..._settings.ProviderSettings`, as every provider reports them).

    The settings read last are answered again while nothing they came from has
    changed: the configuration (:func:`managoat_sandbox.config.version`) and the
    environment variables of the settings it does not set, which are read at every
    call. A refusal is never kept: the next call reads the scope again.
    """
    global _last
    last = _last
    if last is not None and last.current():
        return last.settings
    version = config.version()
    configured = config.snapshot().get(SETTINGS.scope, {})
    env = tuple(
        (setting.env, os.environ.get(setting.env))
        for key, setting in DECLARATION.settings.items()
        if setting.env and key not in configured
    )
    settings = Settings(
        api_key=SETTINGS.credential("api_key"),
        base_url=SETTINGS.url("base_url"),
        template=SETTINGS.text("template"),
        user=SETTINGS.text("user"),
        timeout=max(SETTINGS.seconds("timeout_ms"), 0.001),
        sandbox_url=SETTINGS.optional_url("sandbox_url"),
    )
    _last = _Read(version, env, settings)
    return settings
