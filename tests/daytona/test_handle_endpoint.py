"""A Daytona handle carries the endpoint it was made against: used after ``api_url``
changed, it fails before any request instead of reaching another control plane."""

from __future__ import annotations

import pytest
import responses

from managoat_sandbox import NetworkPolicy, config
from managoat_sandbox.errors import Invalid
from managoat_sandbox.providers._endpoint import Endpoint
from managoat_sandbox.providers.daytona import Daytona
from managoat_sandbox.types import Handle

from .conftest import API, KEY, sandbox

OTHER = "https://elsewhere.daytona.test/api"


def test_a_handle_made_under_an_override_fails_after_it_instead_of_reaching_another_endpoint(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    mocked.post(f"{OTHER}/sandbox", json=sandbox(state="creating"))
    with config.override("daytona", api_url=OTHER):
        handle = daytona.create("box")
    mocked.calls.reset()
    operations = (
        daytona.destroy,
        daytona.get,
        daytona.suspend,
        daytona.resume,
        daytona.list_sessions,
        daytona.public_url,
        lambda h: daytona.exec(h, "true"),
        lambda h: daytona.read_file(h, "/tmp/x"),
        lambda h: daytona.apply_network_policy(h, NetworkPolicy(allow=[])),
    )
    for operation in operations:
        with pytest.raises(Invalid) as raised:
            operation(handle)
        assert raised.value.detail == ("handle", "endpoint_changed")
        assert OTHER in str(raised.value) and API in str(raised.value)
    assert len(mocked.calls) == 0
    mocked.delete(f"{OTHER}/sandbox/box", json=sandbox(state="destroying"))
    with config.override("daytona", api_url=OTHER):
        daytona.destroy(handle)
    assert [call.request.url for call in mocked.calls] == [f"{OTHER}/sandbox/box"]


def test_built_handles_carry_the_endpoint_and_bare_ones_use_the_configured_one(
    mocked: responses.RequestsMock, daytona: Daytona
) -> None:
    built = daytona.build_handle("box")
    assert built.private == Endpoint(API)
    with config.override("daytona", api_url=OTHER), pytest.raises(Invalid):
        daytona.destroy(built)
    mocked.delete(f"{API}/sandbox/box", json=sandbox(state="destroying"))
    daytona.destroy(built)
    mocked.delete(f"{OTHER}/sandbox/box", json=sandbox(state="destroying"))
    with config.override("daytona", api_url=OTHER):
        daytona.destroy(Handle("daytona", "box"))
    assert [call.request.url for call in mocked.calls] == [
        f"{API}/sandbox/box",
        f"{OTHER}/sandbox/box",
    ]


def test_the_handle_carries_no_credential(daytona: Daytona) -> None:
    config.configure("daytona", api_url="https://user:pw@api.daytona.test/api?key=k")
    shown = repr(daytona.build_handle("box").private)
    assert "api.daytona.test" in shown
    assert "pw" not in shown and "key" not in shown and KEY not in shown
