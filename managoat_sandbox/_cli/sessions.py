"""Session commands that do not stream: ``sessions`` and ``terminate``.

(``attach`` streams; it lives in :mod:`managoat_sandbox._cli.streaming`.)
"""

from __future__ import annotations

import argparse

from .. import facade as sandbox
from . import exits
from .console import Console
from .render import session_document, session_fields

__all__ = ["run_sessions", "run_terminate"]


def run_sessions(args: argparse.Namespace, console: Console) -> int:
    """List the sandbox's detachable sessions, one ``ID<TAB>STATE<TAB>CREATED<TAB>COMMAND``
    line each (STATE: ``running``, ``exited N``, ``ended`` or ``-`` where the provider
    does not say)."""
    handle = sandbox.build_handle(args.provider, args.name)
    sessions = sandbox.list_sessions(handle)
    if console.json_mode:
        console.document([session_document(session) for session in sessions])
    else:
        for session in sessions:
            console.row(*session_fields(session))
    return exits.OK


def run_terminate(args: argparse.Namespace, console: Console) -> int:
    """End a session, confirmed by the provider; ``--force`` kills rather than asks."""
    handle = sandbox.build_handle(args.provider, args.name)
    mode = "force" if args.force else "graceful"
    sandbox.terminate_session(handle, args.session_id, timeout=args.timeout, mode=mode)
    if console.json_mode:
        console.document(
            {
                "ok": True,
                "action": "terminate",
                "provider": handle.provider,
                "name": handle.name,
                "session_id": args.session_id,
                "mode": mode,
            }
        )
    return exits.OK
