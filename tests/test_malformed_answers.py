"""A malformed answer maps to the same taxonomy error whichever provider sent it.

Each hosted adapter's lookup is fed, over the wire (``responses``), a 200 whose body
does not parse as JSON, then a 200 that parses but has the wrong shape (an array
where an object is due, or an object where an array is due). The first is
``Unavailable(("malformed_json", 200))`` and the second
``ProviderError(provider, (reason, <type>))`` from every provider.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import pytest
import responses

from managoat_sandbox import config
from managoat_sandbox.errors import ProviderError, Unavailable
from managoat_sandbox.providers.daytona import Daytona
from managoat_sandbox.providers.e2b import E2B
from managoat_sandbox.providers.sprites import Sprites
from managoat_sandbox.types import Handle

TORN = b'{"name": "bo'


def _sprites(mock: responses.RequestsMock, body: bytes) -> Callable[[], object]:
    config.configure("sprites", base_url="https://sprites.test", token="sprites-token")
    mock.add(responses.GET, "https://sprites.test/v1/sprites/box", body=body)
    adapter = Sprites()
    return lambda: adapter.get(Handle("sprites", "box"))


def _e2b(mock: responses.RequestsMock, body: bytes) -> Callable[[], object]:
    config.configure("e2b", base_url="https://e2b.test", api_key="e2b-key")
    mock.add(responses.GET, re.compile(r"https://e2b\.test/v2/sandboxes(\?.*)?$"), body=body)
    adapter = E2B()
    return lambda: adapter.get(adapter.build_handle("box"))


def _daytona(mock: responses.RequestsMock, body: bytes) -> Callable[[], object]:
    config.configure("daytona", api_url="https://daytona.test/api", api_key="daytona-key")
    mock.add(responses.GET, "https://daytona.test/api/sandbox/box", body=body)
    adapter = Daytona()
    return lambda: adapter.get(adapter.build_handle("box"))


#: provider → (arrange a lookup answering a body, a well-formed body of the wrong shape)
PROVIDERS = {
    "sprites": (_sprites, b"[]", "list"),
    "e2b": (_e2b, b'{"sandboxes": []}', "dict"),
    "daytona": (_daytona, b"[]", "list"),
}


@pytest.fixture
def mock() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=True) as rsps:
        yield rsps


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_a_body_that_is_not_json_is_unavailable_from_every_provider(
    mock: responses.RequestsMock, provider: str
) -> None:
    arrange, _, _ = PROVIDERS[provider]
    lookup = arrange(mock, TORN)
    with pytest.raises(Unavailable) as caught:
        lookup()
    assert type(caught.value) is Unavailable
    assert caught.value.detail == ("malformed_json", 200)


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_json_of_the_wrong_shape_is_a_provider_error_from_every_provider(
    mock: responses.RequestsMock, provider: str
) -> None:
    arrange, wrong, kind = PROVIDERS[provider]
    lookup = arrange(mock, wrong)
    with pytest.raises(ProviderError) as caught:
        lookup()
    assert caught.value.provider == provider
    reason, named = caught.value.detail
    assert isinstance(reason, str) and named == kind
