"""Every request of the Sprites adapter names it, whichever path it takes: the pooled
client, a bounded "once" exchange on a fresh connection, or a WebSocket handshake."""

from __future__ import annotations

from managoat_sandbox.emulators.sprites import SpritesEmulator
from managoat_sandbox.providers.sprites import Sprites
from managoat_sandbox.providers.sprites.settings import USER_AGENT


def test_every_request_and_handshake_names_the_adapter(
    sprites: Sprites, emu: SpritesEmulator
) -> None:
    handle = sprites.create_new("named-box")
    assert sprites.exec(handle, "true").exit_code == 0
    sprites.write_file(handle, "/tmp/x", b"x")
    sprites.destroy(handle)
    paths = {(r.method, r.path) for r in emu.requests}
    assert ("POST", "/v1/sprites") in paths, "create_new's bounded exchange"
    assert ("GET", "/v1/sprites/named-box/exec") in paths, "exec's WebSocket handshake"
    assert ("PUT", "/v1/sprites/named-box/fs/write") in paths, "a pooled request"
    agents = {r.headers.get("User-Agent") for r in emu.requests}
    assert agents == {USER_AGENT}
