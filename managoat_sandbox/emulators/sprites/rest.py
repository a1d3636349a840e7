"""The Sprites REST routes: sprites, listing, network policy, checkpoints.

Behaviour follows docs/protocols/sprites.md#rest-endpoints: create answers 201
(409 for a taken name), delete 204, the policy POST 204, checkpoint and
restore answer 200 NDJSON streams; a listing never says ``has_more`` without
a continuation token.

The filesystem routes live in :mod:`.files`. A network policy is put in
force through the box's egress filter where it maps onto one
(:mod:`.network`). A checkpoint copies the sprite's files
(:mod:`managoat_sandbox._engine.trees`); a restore first stops the sprite's
agent — its commands end, as on a machine restored from a snapshot — then
swaps the files in; the agent restarts with the next command.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import errno
from pathlib import Path
from typing import Any

from aiohttp import web

from ..._engine import trees
from .._blocking import run_blocking
from .._input import BadInput, load_json
from .._server import Faults
from . import wire
from .behaviour import Behaviour
from .network import egress_policy
from .state import (
    Checkpoint,
    Sprite,
    State,
    abort_connections,
    dispose,
    now,
    rfc3339,
    stop_machine,
)

URL_AUTH = ("sprite", "public")
POLICY_ACTIONS = ("allow", "deny")
ENDLESS = "endless"


class Rest:
    """Handlers of the REST routes over one emulator's state."""

    def __init__(self, state: State, faults: Faults, behaviour: Behaviour) -> None:
        self.state = state
        self.faults = faults
        self.behaviour = behaviour
        self._endless = 0

    def add_routes(self, app: web.Application) -> None:
        """Register the routes."""
        router = app.router
        router.add_post("/v1/sprites", self.create)
        router.add_get("/v1/sprites", self.list)
        router.add_get("/v1/sprites/{name}", self.get)
        router.add_put("/v1/sprites/{name}", self.update)
        router.add_delete("/v1/sprites/{name}", self.delete)
        router.add_get("/v1/sprites/{name}/policy/network", self.get_policy)
        router.add_post("/v1/sprites/{name}/policy/network", self.set_policy)
        router.add_post("/v1/sprites/{name}/checkpoint", self.create_checkpoint)
        router.add_get("/v1/sprites/{name}/checkpoints", self.list_checkpoints)
        router.add_get("/v1/sprites/{name}/checkpoints/{checkpoint}", self.get_checkpoint)
        router.add_post("/v1/sprites/{name}/checkpoints/{checkpoint}/restore", self.restore)

    def sprite(self, request: web.Request) -> Sprite | None:
        """The sprite the request's path names."""
        return self.state.get(request.match_info["name"])

    # -- sprites ---------------------------------------------------------------------

    async def create(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/sprites`` → 201 with the sprite; 409 for a taken name."""
        body = await _json_object(request)
        if body is None:
            return wire.invalid("the body must be a JSON object")
        name = body.get("name")
        if not isinstance(name, str) or not name:
            return wire.invalid("name is required")
        if not name.isprintable():
            return wire.invalid("name must not contain control characters")
        settings = body.get("url_settings")
        problem = _check_url_settings(settings) or _check_labels(body.get("labels"))
        if problem is not None:
            return wire.invalid(problem)
        sprite = await run_blocking(lambda: self.state.create(name))
        if sprite is None:
            if self.behaviour.conflict_status == 409:
                return wire.error(409, "already_exists", f"sprite {name!r} already exists")
            return wire.error(
                self.behaviour.conflict_status,
                "invalid_request",
                "invalid request body or name already exists",
            )
        _apply_settings(sprite, settings, body.get("labels"), clear=False)
        sprite.boot_refusals = self.behaviour.boot_refusals
        return web.json_response(sprite.to_json(), status=201)

    async def get(self, request: web.Request) -> web.StreamResponse:
        """``GET /v1/sprites/{name}``."""
        sprite = self.sprite(request)
        if sprite is None:
            return wire.not_found("sprite")
        return web.json_response(await run_blocking(sprite.to_json))

    async def update(self, request: web.Request) -> web.StreamResponse:
        """``PUT /v1/sprites/{name}``: a partial update of URL settings and labels."""
        sprite = self.sprite(request)
        if sprite is None:
            return wire.not_found("sprite")
        body = await _json_object(request)
        if body is None:
            return wire.invalid("the body must be a JSON object")
        settings = body.get("url_settings")
        problem = _check_url_settings(settings) or _check_labels(body.get("labels"))
        if problem is not None:
            return wire.invalid(problem)
        clear = body.get("clear_labels") is True
        _apply_settings(sprite, settings, body.get("labels"), clear=clear)
        sprite.updated_at = now()
        return web.json_response(await run_blocking(sprite.to_json))

    async def delete(self, request: web.Request) -> web.StreamResponse:
        """``DELETE /v1/sprites/{name}`` → 204: sockets aborted, the box stopped (every
        command ends), files and checkpoints gone."""
        sprite = self.state.remove(request.match_info["name"])
        if sprite is None:
            return wire.not_found("sprite")
        abort_connections(sprite)
        await run_blocking(lambda: dispose(sprite))
        return web.Response(status=204)

    async def list(self, request: web.Request) -> web.StreamResponse:
        """``GET /v1/sprites``: name-sorted pages behind opaque continuation tokens."""
        query = request.query
        try:
            wanted = int(query.get("max_results") or self.behaviour.page_size)
        except ValueError:
            return wire.invalid("max_results must be an integer")
        size = max(1, min(wanted, self.behaviour.page_size))
        names = [n for n in self.state.names() if n.startswith(query.get("prefix", ""))]
        token = query.get("continuation_token")
        if token:
            after = _decode_token(token)
            if after is None:
                return wire.invalid("bad continuation_token")
            names = [n for n in names if n > after]
        page, more = names[:size], len(names) > size
        next_token = _encode_token(page[-1]) if more and page else None
        if self.faults.take("listing", request.method, request.path) is not None:
            self._endless += 1
            next_token = _encode_token(f"\0{ENDLESS}{self._endless}")
        sprites = [s for s in (self.state.get(n) for n in page) if s is not None]
        counts = await run_blocking(self._counts)
        return web.json_response(
            {
                "sprites": await run_blocking(lambda: [s.to_json() for s in sprites]),
                "has_more": next_token is not None,
                "next_continuation_token": next_token,
                **counts,
            }
        )

    def _counts(self) -> dict[str, int]:
        counts = {status: 0 for status in ("running", "warm", "cold")}
        for name in self.state.names():
            other = self.state.get(name)
            if other is not None:
                counts[other.status()] += 1
        return counts

    # -- network policy ----------------------------------------------------------------

    async def get_policy(self, request: web.Request) -> web.StreamResponse:
        """``GET …/policy/network`` → ``{"rules": [...]}`` (``[]`` when none)."""
        sprite = self.sprite(request)
        if sprite is None:
            return wire.not_found("sprite")
        return web.json_response({"rules": sprite.policy})

    async def set_policy(self, request: web.Request) -> web.StreamResponse:
        """``POST …/policy/network`` → 204; 400 ``invalid_policy`` for a bad rule."""
        sprite = self.sprite(request)
        if sprite is None:
            return wire.not_found("sprite")
        body = await _json_object(request)
        rules = None if body is None else body.get("rules")
        problem = _check_rules(rules)
        if problem is not None:
            return wire.error(400, "invalid_policy", problem)
        if self.behaviour.policy_delay > 0 and await run_blocking(sprite.status) == "cold":
            await asyncio.sleep(self.behaviour.policy_delay)
        assert isinstance(rules, list)
        policy = [dict(rule) for rule in rules]
        await run_blocking(lambda: sprite.box.set_policy(egress_policy(policy)))
        sprite.policy = policy
        return web.Response(status=204)

    # -- checkpoints -----------------------------------------------------------------------------

    async def create_checkpoint(self, request: web.Request) -> web.StreamResponse:
        """``POST …/checkpoint`` → NDJSON ``info``…, ``complete`` once the snapshot exists."""
        sprite = self.sprite(request)
        if sprite is None:
            return wire.not_found("sprite")
        body = await _json_object(request, empty_ok=True)
        comment = None if body is None else body.get("comment", "")
        if not isinstance(comment, str):
            return wire.invalid("comment must be a string")
        script = self.faults.take("ndjson", request.method, request.path)
        if script is not None:
            return await wire.scripted(request, script.body or [], cut=script.size > 0)
        stream = await wire.NdjsonStream(request).open()
        await stream.line(wire.event("info", data="Creating checkpoint..."))
        sprite.checkpoint_counter += 1
        checkpoint_id = f"v{sprite.checkpoint_counter}"
        target = sprite.checkpoint_root / checkpoint_id
        try:
            async with sprite.machine:
                await run_blocking(lambda: _snapshot(sprite, target))
        except OSError as failure:
            await stream.line(wire.event("error", error=f"Checkpoint failed: {failure.strerror}"))
            return await stream.finish()
        sprite.checkpoints.append(
            Checkpoint(checkpoint_id, comment, now(), target, [dict(r) for r in sprite.policy])
        )
        await stream.line(wire.event("info", data="Filesystem snapshot saved"))
        await stream.line(wire.event("complete", data=f"Checkpoint {checkpoint_id} created"))
        return await stream.finish()

    async def list_checkpoints(self, request: web.Request) -> web.StreamResponse:
        """``GET …/checkpoints``: newest first, after the synthetic ``Current`` entry."""
        sprite = self.sprite(request)
        if sprite is None:
            return wire.not_found("sprite")
        saved = [c.listing() for c in reversed(sprite.checkpoints)]
        return web.json_response([_current(), *saved])

    async def get_checkpoint(self, request: web.Request) -> web.StreamResponse:
        """``GET …/checkpoints/{id}``."""
        sprite = self.sprite(request)
        if sprite is None:
            return wire.not_found("sprite")
        wanted = request.match_info["checkpoint"]
        if wanted == "Current":
            return web.json_response(_current())
        found = _find(sprite, wanted)
        return wire.not_found("checkpoint") if found is None else web.json_response(found.listing())

    async def restore(self, request: web.Request) -> web.StreamResponse:
        """``POST …/checkpoints/{id}/restore`` → NDJSON; failures are reported in-band."""
        sprite = self.sprite(request)
        if sprite is None:
            return wire.not_found("sprite")
        wanted = request.match_info["checkpoint"]
        found = _find(sprite, wanted)
        if found is None and self.behaviour.restore_unknown_status is not None:
            return wire.error(
                self.behaviour.restore_unknown_status, "not_found", "checkpoint not found"
            )
        script = self.faults.take("ndjson", request.method, request.path)
        if script is not None:
            return await wire.scripted(request, script.body or [], cut=script.size > 0)
        stream = await wire.NdjsonStream(request).open()
        await stream.line(wire.event("info", data=f"Restoring checkpoint {wanted}..."))
        if found is None:
            await stream.line(wire.event("error", error="checkpoint not found"))
            return await stream.finish()
        checkpoint = found
        policy = [dict(rule) for rule in checkpoint.policy]
        try:
            async with sprite.machine:
                await run_blocking(lambda: _restore(sprite, checkpoint, policy))
        except OSError as failure:
            await stream.line(wire.event("error", error=f"Restore failed: {failure.strerror}"))
            return await stream.finish()
        sprite.policy = policy
        await stream.line(wire.event("complete", data=f"Restored checkpoint {wanted}"))
        return await stream.finish()


# -- helpers ---------------------------------------------------------------------------------


async def _json_object(request: web.Request, *, empty_ok: bool = False) -> dict[str, Any] | None:
    """The body as a JSON object; None when it is not one, or is JSON no route takes
    (see :mod:`.._input`); an empty body is ``{}`` if ``empty_ok``."""
    raw = await request.read()
    if not raw.strip():
        return {} if empty_ok else None
    try:
        body = load_json(raw)
    except BadInput:
        return None
    return body if isinstance(body, dict) else None


def _check_url_settings(settings: object) -> str | None:
    if settings is None:
        return None
    if not isinstance(settings, dict):
        return "url_settings must be an object"
    if settings.get("auth") is not None and settings.get("auth") not in URL_AUTH:
        return "url_settings.auth must be 'sprite' or 'public'"
    access = settings.get("private_access")
    if access is not None and not isinstance(access, str):
        return "url_settings.private_access must be a string"
    return None


def _check_labels(labels: object) -> str | None:
    if labels is None or (isinstance(labels, list) and all(isinstance(x, str) for x in labels)):
        return None
    return "labels must be a list of strings"


def _apply_settings(sprite: Sprite, settings: Any, labels: Any, *, clear: bool) -> None:
    if isinstance(settings, dict):
        if settings.get("auth") is not None:
            sprite.url_auth = settings["auth"]
        if settings.get("private_access") is not None:
            sprite.private_access = settings["private_access"]
    if clear:
        sprite.labels = []
    if isinstance(labels, list):
        sprite.labels = list(labels)


def _check_rules(rules: object) -> str | None:
    if not isinstance(rules, list):
        return "rules must be a list"
    for rule in rules:
        if not isinstance(rule, dict):
            return "each rule must be an object"
        include, domain, action = rule.get("include"), rule.get("domain"), rule.get("action")
        if include is not None:
            if not isinstance(include, str) or not include:
                return "include must be a preset name"
            if domain is None and action is None:
                continue
        if not isinstance(domain, str) or not domain:
            return "each rule needs a domain (or an include)"
        if action not in POLICY_ACTIONS:
            return "action must be 'allow' or 'deny'"
    return None


def _encode_token(name: str) -> str:
    return base64.urlsafe_b64encode(name.encode()).decode().rstrip("=")


def _decode_token(token: str) -> str | None:
    try:
        padded = token + "=" * (-len(token) % 4)
        name = base64.b64decode(padded, altchars=b"-_", validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    return "" if name.startswith(f"\0{ENDLESS}") else name


def _snapshot(sprite: Sprite, target: Path) -> None:
    """Copy the sprite's files into the new checkpoint directory ``target`` (blocking)."""
    sprite.checkpoint_root.mkdir(mode=0o700, exist_ok=True)
    trees.copy_tree(sprite.root, target)


def _restore(sprite: Sprite, checkpoint: Checkpoint, policy: list[dict[str, Any]]) -> None:
    """Stop the sprite's agent (its sessions end, lost), then swap the checkpoint's files
    and policy in (blocking)."""
    if not stop_machine(sprite):
        raise OSError(errno.EBUSY, "the sprite's machine did not stop")
    trees.replace_tree(sprite.root, checkpoint.directory, sprite.directory)
    sprite.box.set_policy(egress_policy(policy))


def _current() -> dict[str, Any]:
    return {"id": "Current", "create_time": rfc3339(now()), "comment": ""}


def _find(sprite: Sprite, checkpoint_id: str) -> Checkpoint | None:
    return next((c for c in sprite.checkpoints if c.id == checkpoint_id), None)
