"""An E2B handle carries the endpoint it was made against (and the sandbox id): used
after ``base_url`` changed, it fails before any request instead of reaching another
control plane."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import responses

from managoat_sandbox import config
from managoat_sandbox.errors import Invalid
from managoat_sandbox.providers.e2b import E2B
from managoat_sandbox.providers.e2b.handle import Carried
from managoat_sandbox.types import Handle, NetworkPolicy

from .wire import API, API_KEY, configure, found, item, sandbox

OTHER = "https://elsewhere.e2b.test"


@pytest.fixture
def rsps() -> Iterator[responses.RequestsMock]:
    configure()
    with responses.RequestsMock(assert_all_requests_are_fired=True) as mock:
        yield mock


def test_a_handle_made_under_an_override_fails_after_it_instead_of_reaching_another_endpoint(
    rsps: responses.RequestsMock,
) -> None:
    e2b = E2B()
    rsps.add(responses.GET, f"{OTHER}/v2/sandboxes", json=[])
    rsps.add(responses.POST, f"{OTHER}/v2/sandboxes", json=sandbox("sbxnew"), status=201)
    with config.override("e2b", base_url=OTHER, sandbox_url=OTHER):
        handle = e2b.create("box")
    assert isinstance(handle.private, Carried) and handle.private.sandbox_id == "sbxnew"
    rsps.calls.reset()
    operations = (
        e2b.destroy,
        e2b.get,
        e2b.suspend,
        e2b.resume,
        e2b.list_sessions,
        e2b.public_url,
        lambda h: e2b.exec(h, "true"),
        lambda h: e2b.write_file(h, "/tmp/x", b"x"),
        lambda h: e2b.apply_network_policy(h, NetworkPolicy(allow=[])),
    )
    for operation in operations:
        with pytest.raises(Invalid) as raised:
            operation(handle)
        assert raised.value.detail == ("handle", "endpoint_changed")
        assert OTHER in str(raised.value) and API in str(raised.value)
    assert len(rsps.calls) == 0
    rsps.add(responses.GET, f"{OTHER}/v2/sandboxes", json=[item("sbxnew")])
    rsps.add(responses.DELETE, f"{OTHER}/sandboxes/sbxnew", status=204)
    with config.override("e2b", base_url=OTHER, sandbox_url=OTHER):
        e2b.destroy(handle)
    assert [call.request.method for call in rsps.calls] == ["GET", "DELETE"]


def test_built_handles_carry_the_endpoint_and_bare_ones_use_the_configured_one(
    rsps: responses.RequestsMock,
) -> None:
    e2b = E2B()
    built = e2b.build_handle("box")
    assert built.private == Carried.of(API)
    with config.override("e2b", base_url=OTHER), pytest.raises(Invalid):
        e2b.destroy(built)
    found(rsps)
    e2b.destroy(built)
    rsps.add(responses.GET, f"{OTHER}/v2/sandboxes", json=[])
    with config.override("e2b", base_url=OTHER):
        e2b.destroy(Handle("e2b", "box"))
    assert [str(call.request.url).split("?")[0] for call in rsps.calls] == [
        f"{API}/v2/sandboxes",
        f"{OTHER}/v2/sandboxes",
    ]


def test_the_handle_carries_no_credential(rsps: responses.RequestsMock) -> None:
    e2b = E2B()
    found(rsps, item("sbx9"))
    created = repr(e2b.create("box").private)
    assert "sbx9" in created and API_KEY not in created
    config.configure("e2b", base_url="https://user:pw@api.e2b.test/?key=k")
    shown = repr(e2b.build_handle("box").private)
    assert "api.e2b.test" in shown
    assert "pw" not in shown and "key" not in shown and API_KEY not in shown
