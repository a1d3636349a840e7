"""Configuration: scopes, None as unset, environment defaults, override, reset."""

from __future__ import annotations

import pytest

import managoat_sandbox as sandbox
from managoat_sandbox import config
from managoat_sandbox.errors import Denied
from managoat_sandbox.testing import Fake


def test_a_key_set_to_none_counts_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPRITES_TOKEN", raising=False)
    config.configure("sprites", token="t")
    assert config.get("sprites", "token") == "t"
    config.configure("sprites", token=None)
    assert config.get("sprites", "token") is None
    assert config.get("sprites", "token", "fallback") == "fallback"


def test_environment_variables_are_read_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("E2B_API_KEY", "from-env")
    assert config.get("e2b", "api_key") == "from-env"
    monkeypatch.setenv("E2B_API_KEY", "changed")
    assert config.get("e2b", "api_key") == "changed"
    config.configure("e2b", api_key="explicit")
    assert config.get("e2b", "api_key") == "explicit"


def test_builtin_defaults_follow_the_spec() -> None:
    assert config.get("sprites", "policy_timeout_ms") == 90000
    assert config.get("sprites", "public_urls") is True
    assert config.get("sprites", "checkpoint_creation_enabled") is False
    assert config.get("e2b", "template") == "base"
    assert config.get("retry", "max_retry_after_ms") == 30000


def test_override_restores_what_it_changed() -> None:
    config.configure("daytona", api_url="https://a")
    with config.override("daytona", api_url="https://b", snapshot="s"):
        assert config.get("daytona", "api_url") == "https://b"
        assert config.get("daytona", "snapshot") == "s"
    assert config.get("daytona", "api_url") == "https://a"
    assert config.get("daytona", "snapshot") is None


def test_reset_restores_defaults_and_drops_cached_adapters() -> None:
    config.configure(adapters={"mine": Fake})
    first = sandbox.adapter_for("mine")
    config.reset()
    config.configure(adapters={"mine": Fake})
    assert sandbox.adapter_for("mine") is not first
    config.reset()
    assert config.get("retry", "base_ms") == 250


def test_a_bad_scope_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        config.configure(42, x=1)  # type: ignore[arg-type]


def test_denied_is_not_transient() -> None:
    assert not Denied("x").transient
