"""One-shot sandbox commands: create, get, list, destroy, suspend, resume,
policy, url, write, checkpoint and restore.

Text output is for people and shell scripts: one value per line, nothing on
success for actions. Under ``--json`` each command prints exactly one JSON
document; actions print ``{"ok": true, "action": ..., "provider": ...,
"name": ...}`` plus what they changed. ``get`` never prints the provider's
raw answer, which may hold credentials.
"""

from __future__ import annotations

import argparse
from typing import Any

from .. import facade as sandbox
from ..types import Handle, NetworkPolicy
from . import exits
from .console import Console

__all__ = [
    "run_checkpoint",
    "run_create",
    "run_destroy",
    "run_get",
    "run_list",
    "run_policy",
    "run_restore",
    "run_resume",
    "run_suspend",
    "run_url",
    "run_write",
]


def _handle(args: argparse.Namespace) -> Handle:
    return sandbox.build_handle(args.provider, args.name)


def _where(handle: Handle) -> dict[str, Any]:
    return {"provider": handle.provider, "name": handle.name}


def _done(console: Console, handle: Handle, action: str, **extra: Any) -> int:
    """Report a finished action: silent in text mode, one document under ``--json``."""
    if console.json_mode:
        console.document({"ok": True, "action": action, **_where(handle), **extra})
    return exits.OK


def run_create(args: argparse.Namespace, console: Console) -> int:
    """``create`` adopts an existing name and prints it; ``create --new`` never
    adopts and prints the instance id (the name when the provider assigns none)."""
    if args.new:
        handle = sandbox.create_new(args.provider, args.name)
    else:
        handle = sandbox.create(args.provider, args.name)
    if console.json_mode:
        console.document({**_where(handle), "instance_id": handle.instance_id})
    else:
        console.line(handle.instance_id if args.new and handle.instance_id else handle.name)
    return exits.OK


#: The one field ``get`` takes from a provider's raw answer: the isolation a local
#: sandbox runs with (``namespaces`` or ``none``). Nothing else of it is printed.
ISOLATION_MODES = ("namespaces", "none")


def run_get(args: argparse.Namespace, console: Console) -> int:
    """Print the sandbox's status (``running``, ``suspended`` or ``unknown``), then, for a
    provider that reports one (``local``), ``isolation: namespaces`` or ``isolation: none``."""
    handle = _handle(args)
    info = sandbox.get(handle)
    raw = info.raw if isinstance(info.raw, dict) else {}
    isolation = raw.get("isolation") if raw.get("isolation") in ISOLATION_MODES else None
    if console.json_mode:
        extra = {} if isolation is None else {"isolation": isolation}
        console.document({**_where(handle), "status": info.status, **extra})
    else:
        console.line(info.status)
        if isolation is not None:
            console.line(f"isolation: {isolation}")
    return exits.OK


def run_list(args: argparse.Namespace, console: Console) -> int:
    """Print every sandbox name, sorted (a JSON array under ``--json``)."""
    names = sorted(sandbox.list_all_names(args.provider))
    if console.json_mode:
        console.document(names)
    else:
        for name in names:
            console.line(name)
    return exits.OK


def run_destroy(args: argparse.Namespace, console: Console) -> int:
    """Destroy the sandbox; one already gone is fine."""
    handle = _handle(args)
    sandbox.destroy(handle)
    return _done(console, handle, "destroy")


def run_suspend(args: argparse.Namespace, console: Console) -> int:
    """Park the sandbox."""
    handle = _handle(args)
    sandbox.suspend(handle)
    return _done(console, handle, "suspend")


def run_resume(args: argparse.Namespace, console: Console) -> int:
    """Wake the sandbox."""
    handle = _handle(args)
    sandbox.resume(handle)
    return _done(console, handle, "resume")


def run_policy(args: argparse.Namespace, console: Console) -> int:
    """Replace the egress allowlist: ``--allow`` domains, or ``--deny-all``.

    The parser requires exactly one of the two, so an empty allowlist (deny
    all egress) is never applied by accident.
    """
    handle = _handle(args)
    policy = NetworkPolicy.deny_all() if args.deny_all else NetworkPolicy(allow=args.allow)
    sandbox.apply_network_policy(handle, policy)
    return _done(console, handle, "policy", allow=list(policy.allow))


def run_url(args: argparse.Namespace, console: Console) -> int:
    """Print the public URL; a platform without one is a note on stderr, status 0."""
    handle = _handle(args)
    url = sandbox.public_url(handle)
    if console.json_mode:
        console.document({**_where(handle), "url": url})
    elif url is None:
        console.note(f"{handle.name} has no public URL at provider {handle.provider}")
    else:
        console.line(url)
    return exits.OK


def run_write(args: argparse.Namespace, console: Console) -> int:
    """Write all of stdin to a file in the sandbox (parents are created)."""
    handle = _handle(args)
    data = console.read_all()
    sandbox.write_file(handle, args.path, data, mode=args.mode)
    return _done(console, handle, "write", path=args.path, bytes=len(data))


def run_checkpoint(args: argparse.Namespace, console: Console) -> int:
    """Snapshot the sandbox and print the checkpoint id."""
    handle = _handle(args)
    checkpoint_id = sandbox.create_checkpoint(handle, comment=args.comment)
    if console.json_mode:
        console.document({**_where(handle), "checkpoint_id": checkpoint_id})
    else:
        console.line(checkpoint_id)
    return exits.OK


def run_restore(args: argparse.Namespace, console: Console) -> int:
    """Restore a checkpoint; a reported failure is ``RestoreFailed`` (status 1)."""
    handle = _handle(args)
    sandbox.restore_checkpoint(handle, args.checkpoint_id)
    return _done(console, handle, "restore", checkpoint_id=args.checkpoint_id)
