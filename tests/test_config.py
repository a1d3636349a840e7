"""Configuration: scopes, None as unset, environment defaults, override, reset, and the
rule every setting is checked by where it is configured and where it is read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import managoat_sandbox as sandbox
from managoat_sandbox import _settings, config
from managoat_sandbox._budget import Budget
from managoat_sandbox._setting_rules import MAX_COUNT, RULES
from managoat_sandbox.errors import Denied, Invalid, SandboxError
from managoat_sandbox.providers.daytona import settings as daytona_settings
from managoat_sandbox.providers.e2b.settings import load as load_e2b_settings
from managoat_sandbox.providers.local import adapter as local_adapter
from managoat_sandbox.providers.local import settings as local_settings
from managoat_sandbox.providers.sprites import settings as sprites_settings
from managoat_sandbox.retry import with_backoff
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


# -- every setting is checked where it is configured -----------------------------------

_deep: list[Any] = ["auto"]
for _ in range(5000):
    _deep = [_deep]
_selfref: list[Any] = []
_selfref.append(_selfref)

#: Values no setting takes: non-finite and huge numbers, negatives, NUL, lone
#: surrogates, deep or circular nesting, and values of no setting's type.
HOSTILE: list[Any] = [
    float("nan"),
    float("inf"),
    -float("inf"),
    10**400,
    -(10**400),
    10**5000,
    -1,
    "\x00",
    "a\x00b",
    "a\ud800",
    "\udcff",
    _deep,
    _selfref,
    {"host.test": _deep},
    object(),
    b"bytes",
]

#: Keys whose rule takes a bool.
FLAGS = {("sprites", "public_urls"), ("sprites", "checkpoint_creation_enabled")}


def _cases() -> list[Any]:
    cases = []
    for scope, key in sorted(RULES, key=str):
        values = [*HOSTILE, *([] if (scope, key) in FLAGS else [True, False])]
        cases += [
            pytest.param(scope, key, value, id=f"{scope}.{key}-{i}")
            for i, value in enumerate(values)
        ]
    return cases


@pytest.mark.parametrize(("scope", "key", "value"), _cases())
def test_a_setting_its_rule_refuses_is_invalid_where_it_is_configured(
    scope: str | None, key: str, value: Any
) -> None:
    before = config.snapshot()
    with pytest.raises(Invalid) as caught:
        config.configure(scope, **{key: value})
    assert caught.value.detail == ("config", scope, key)
    name = key if scope is None else f"{scope}.{key}"
    assert caught.value.message is not None and caught.value.message.startswith(f"{name} must be")
    assert len(str(caught.value)) < 1000
    assert config.snapshot() == before


def test_every_setting_the_library_reads_has_a_rule() -> None:
    assert set(config.ENV_VARS) <= set(RULES)
    assert set(config._DEFAULTS) <= set(RULES)


@pytest.mark.parametrize(
    ("scope", "settings"),
    [
        ("retry", {"attempts": 1, "base_ms": 0, "max_ms": "2000", "budget": 0.5}),
        ("retry", {"max_retry_after_ms": 1e6, "attempts": MAX_COUNT}),
        ("local", {"isolation": "off", "retained_sessions": 0, "egress_hosts": {"A.test.": "::1"}}),
        (
            "sprites",
            {"token": "", "timeout_ms": 1, "public_urls": False, "base_url": "http://h:1/"},
        ),
        ("e2b", {"template": "base", "user": "ü", "sandbox_url": "", "timeout_ms": "1500"}),
        ("daytona", {"snapshot": "", "organization_id": "org-1", "api_url": "https://d.test/api"}),
        (None, {"adapters": {"mine": Fake, "other": Fake()}}),
    ],
)
def test_usable_settings_are_taken_as_given(scope: str | None, settings: dict[str, Any]) -> None:
    config.configure(scope, **settings)
    assert {key: config.get(scope, key) for key in settings} == settings


def test_a_refused_setting_stores_nothing_of_the_call() -> None:
    with pytest.raises(Invalid) as caught:
        config.configure("retry", attempts=5, budget=-1)
    assert caught.value.detail == ("config", "retry", "budget")
    assert config.get("retry", "attempts") == 3
    with pytest.raises(Invalid), config.override("retry", attempts=0):
        pytest.fail("override entered its block with a refused setting")
    assert config.get("retry", "attempts") == 3


@pytest.mark.parametrize("key", ["token", "base_url"])
def test_a_refused_credential_or_url_is_never_shown(key: str) -> None:
    secret = "s3cr3t-\x00-value"
    with pytest.raises(Invalid) as caught:
        config.configure("sprites", **{key: secret})
    assert "s3cr3t" not in str(caught.value) and "s3cr3t" not in repr(caught.value)


def test_a_local_root_with_nul_or_a_lone_surrogate_is_invalid(tmp_path: Path) -> None:
    for root in ("\x00", str(tmp_path / "a\x00b"), str(tmp_path / "\ud800")):
        with pytest.raises(Invalid) as caught:
            config.configure("local", root=root)
        assert caught.value.detail == ("config", "local", "root")
    config.configure("local", root=tmp_path / "root")  # a path object is a path
    assert sandbox.list_all_names("local") == frozenset()
    assert list(tmp_path.iterdir()) == [tmp_path / "root"]


def test_egress_hosts_must_pin_names_to_addresses() -> None:
    for pins in ({"a.test": "not-an-address"}, {"": "127.0.0.1"}, {"a b": "127.0.0.1"}, ["a"]):
        with pytest.raises(Invalid) as caught:
            config.configure("local", egress_hosts=pins)
        assert caught.value.detail == ("config", "local", "egress_hosts")


def test_a_setting_from_the_environment_is_checked_when_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config.configure("local", root=str(tmp_path))
    monkeypatch.setenv("E2B_BASE_URL", "http://[::1")
    with pytest.raises(Invalid) as caught:
        load_e2b_settings()
    assert caught.value.detail == ("config", "e2b", "base_url")
    monkeypatch.setenv("MANAGOAT_SANDBOX_LOCAL_ISOLATION", "\udcff")
    with pytest.raises(Invalid) as caught:
        sandbox.create("local", "env")
    assert caught.value.detail == ("config", "local", "isolation")


def _read_scope(scope: str | None) -> None:
    """Read every setting of ``scope`` the way the library does at call time (never
    ``local.root``, which would create the directory it names)."""
    if scope == "retry":
        with_backoff(lambda: None)
        Budget().take()
    elif scope == "local":
        local_settings.isolation()
        local_settings.retained_sessions()
        local_adapter._pins()
    elif scope == "sprites":
        sprites_settings.load()
        sprites_settings.checkpoints_enabled()
    elif scope == "e2b":
        load_e2b_settings()
    elif scope == "daytona":
        daytona_settings.api_url()
        daytona_settings.auth_headers()
    else:
        sandbox.adapters()


_deep_text: Any = "x"
for _ in range(3000):
    _deep_text = {"k": _deep_text}
_numbers = st.one_of(
    st.integers(),
    st.sampled_from([10**400, -(10**400), 2**31, 2**63]),
    st.builds(pow, st.just(10), st.just(5000)),  # too long for repr()
    st.floats(allow_nan=True, allow_infinity=True),
)
_texts = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", "\x00", "a\ud800", "\udcff", "http://[x", "http://h:99999/", "1e400"]),
    st.sampled_from(["auto", "off", "https://h.test/api", "250", "127.0.0.1", "base"]),
)
_leaves = st.one_of(st.none(), st.booleans(), _numbers, _texts, st.binary(max_size=8))
_values = st.one_of(
    st.recursive(
        _leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(_texts, inner, max_size=3)
        ),
        max_leaves=6,
    ),
    st.sampled_from([_deep, _selfref, _deep_text]),
)


@settings(max_examples=300, deadline=None)
@given(setting=st.sampled_from(sorted(set(RULES) - {("local", "root")}, key=str)), value=_values)
def test_a_setting_is_refused_when_configured_or_usable_when_read(
    setting: tuple[str | None, str], value: Any
) -> None:
    scope, key = setting
    try:
        config.configure(scope, **{key: value})
    except Invalid as refused:
        assert refused.detail == ("config", scope, key)
        return
    try:
        _read_scope(scope)
    except SandboxError:
        pass  # a missing credential, say: the taxonomy's answer
    finally:
        config.configure(scope, **{key: None})


def test_egress_hosts_changed_after_configure_are_checked_when_read(tmp_path: Path) -> None:
    config.configure("local", root=str(tmp_path / "root"))
    pins = {"a.test": "127.0.0.1"}
    config.configure("local", egress_hosts=pins)
    pins["b.test"] = "not-an-address"
    try:
        with pytest.raises(Invalid) as caught:
            sandbox.create("local", "pins")
        assert caught.value.detail == ("config", "local", "egress_hosts")
    finally:
        _destroy_every_local_sandbox()


def _destroy_every_local_sandbox() -> None:
    for name in sandbox.list_all_names("local"):
        sandbox.destroy(sandbox.build_handle("local", name))


def test_the_version_changes_with_anything_configured() -> None:
    seen = [config.version()]
    config.configure("e2b", template="other")
    seen.append(config.version())
    with config.override("e2b", template="third"):
        seen.append(config.version())
    seen.append(config.version())
    config.reset()
    seen.append(config.version())
    assert len(set(seen)) == len(seen) and seen == sorted(seen)


def test_e2b_settings_are_read_again_only_when_what_they_come_from_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("E2B_API_KEY", raising=False)
    monkeypatch.delenv("E2B_BASE_URL", raising=False)
    config.configure("e2b", api_key="key-one")
    first = load_e2b_settings()
    assert load_e2b_settings() is first
    config.configure("e2b", template="other")
    changed = load_e2b_settings()
    assert changed is not first and changed.template == "other"
    monkeypatch.setenv("E2B_BASE_URL", "https://api.other.test/")
    from_env = load_e2b_settings()
    assert from_env.base_url == "https://api.other.test" and load_e2b_settings() is from_env
    with config.override("e2b", base_url="https://api.third.test"):
        assert load_e2b_settings().base_url == "https://api.third.test"
    assert load_e2b_settings().base_url == "https://api.other.test"
    monkeypatch.setenv("E2B_API_KEY", "key-from-env")  # the configured key still wins
    assert load_e2b_settings().api_key == "key-one"


def test_a_refused_e2b_read_is_refused_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("E2B_API_KEY", raising=False)
    for _ in range(2):
        with pytest.raises(Denied):
            load_e2b_settings()
    monkeypatch.setenv("E2B_API_KEY", "now-set")
    assert load_e2b_settings().api_key == "now-set"
    monkeypatch.delenv("E2B_API_KEY")
    with pytest.raises(Denied):
        load_e2b_settings()


def test_a_setting_read_again_unchanged_is_not_checked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checks: list[object] = []
    real = _settings.check

    def counting(scope: str | None, key: str, value: object) -> object:
        checks.append(value)
        return real(scope, key, value)

    monkeypatch.setattr(_settings, "check", counting)
    config.configure("e2b", template="one")
    for _ in range(3):
        assert _settings.read("e2b", "template") == "one"
    config.configure("e2b", template="two")
    assert _settings.read("e2b", "template") == "two"
    assert checks == ["one", "two"]
    config.configure("e2b", timeout_ms=1500)
    assert _settings.read("e2b", "timeout_ms") == 1.5
    config.configure("e2b", timeout_ms=1500.0)  # equal, of another type: checked again
    assert _settings.read("e2b", "timeout_ms") == 1.5
    assert checks == ["one", "two", 1500, 1500.0]
