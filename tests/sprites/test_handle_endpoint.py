"""A Sprites handle carries the endpoint it was made against: used after ``base_url``
changed, it fails before any request instead of reaching another endpoint."""

from __future__ import annotations

import pytest
import responses

from managoat_sandbox import config
from managoat_sandbox.errors import Invalid
from managoat_sandbox.providers.sprites import Sprites
from managoat_sandbox.types import Handle

from .wire import BASE, url

OTHER = "https://elsewhere.sprites.test"


def test_a_handle_made_under_an_override_fails_after_it_instead_of_reaching_another_endpoint(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    api.post(f"{OTHER}/v1/sprites", json={"id": "sp-1"}, status=201)
    api.put(f"{OTHER}/v1/sprites/box", json={})
    with config.override("sprites", base_url=OTHER, public_urls=False):
        handle = adapter.create("box")
    api.calls.reset()
    for operation in (adapter.destroy, adapter.get, adapter.list_sessions):
        with pytest.raises(Invalid) as raised:
            operation(handle)
        assert raised.value.detail == ("handle", "endpoint_changed")
        assert OTHER in str(raised.value) and BASE in str(raised.value)
    assert len(api.calls) == 0
    api.delete(f"{OTHER}/v1/sprites/box", status=204)
    with config.override("sprites", base_url=OTHER):
        adapter.destroy(handle)
    assert [call.request.url for call in api.calls] == [f"{OTHER}/v1/sprites/box"]


def test_built_handles_carry_the_endpoint_and_bare_ones_use_the_configured_one(
    api: responses.RequestsMock, adapter: Sprites
) -> None:
    built = adapter.build_handle("box")
    with config.override("sprites", base_url=OTHER), pytest.raises(Invalid):
        adapter.destroy(built)
    api.delete(url("/v1/sprites/box"), status=204)
    adapter.destroy(built)
    api.delete(f"{OTHER}/v1/sprites/box", status=204)
    with config.override("sprites", base_url=OTHER):
        adapter.destroy(Handle("sprites", "box"))
    assert [call.request.url for call in api.calls] == [
        url("/v1/sprites/box"),
        f"{OTHER}/v1/sprites/box",
    ]


def test_the_handle_carries_no_credential(api: responses.RequestsMock, adapter: Sprites) -> None:
    config.configure("sprites", base_url="https://user:pw@api.sprites.test/?key=k")
    handle = adapter.build_handle("box")
    shown = repr(handle.private)
    assert "api.sprites.test" in shown
    assert "pw" not in shown and "key" not in shown
