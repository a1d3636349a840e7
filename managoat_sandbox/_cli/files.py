"""Reading a sandbox's files from the shell: ``read`` and ``ls``.

``read`` writes a file's bytes exactly as they are — to stdout (nothing
escaped, like ``cat``) or to ``-o FILE``. ``ls`` prints one line per entry,
``TYPE<TAB>MODE<TAB>SIZE<TAB>MODIFIED<TAB>NAME``, names escaped like every
other listing (a name is the sandbox's, so it may hold control characters).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
from typing import Any

from .. import facade as sandbox
from . import exits
from .console import Console
from .render import file_document, file_fields

__all__ = ["run_ls", "run_read"]


def run_read(args: argparse.Namespace, console: Console) -> int:
    """Read the file (``--max-bytes``: refuse one larger, ``Truncated``) and write its
    bytes to stdout, or to ``-o FILE`` (created or replaced only once the read
    succeeded; a FILE that cannot be written is one line on stderr, status 1). Under
    ``--json``: one document with ``bytes`` and, without ``-o``, the
    content as ``data_b64`` (and ``text`` when it is valid UTF-8)."""
    handle = sandbox.build_handle(args.provider, args.name)
    data = sandbox.read_file(handle, args.path, max_bytes=args.max_bytes)
    if args.output is not None:
        try:
            with open(args.output, "wb") as target:
                target.write(data)
        except OSError as error:
            console.note(f"error: cannot write {args.output}: {error.strerror}")
            return exits.ERROR
    if console.json_mode:
        doc: dict[str, Any] = {
            "provider": handle.provider,
            "name": handle.name,
            "path": args.path,
            "bytes": len(data),
        }
        if args.output is not None:
            doc["output"] = args.output
        else:
            doc["data_b64"] = base64.b64encode(data).decode("ascii")
            with contextlib.suppress(UnicodeDecodeError):
                doc["text"] = data.decode("utf-8")
        console.document(doc)
    elif args.output is None:
        console.out(data)
    return exits.OK


def run_ls(args: argparse.Namespace, console: Console) -> int:
    """List the directory, by name: one ``TYPE MODE SIZE MODIFIED NAME`` line per entry
    (tab-separated), or under ``--json`` one array of entry documents."""
    handle = sandbox.build_handle(args.provider, args.name)
    entries = sorted(sandbox.list_files(handle, args.path), key=lambda entry: entry.name)
    if console.json_mode:
        console.document([file_document(entry) for entry in entries])
    else:
        for entry in entries:
            console.row(*file_fields(entry))
    return exits.OK
