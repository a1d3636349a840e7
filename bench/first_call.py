"""Import plus first request, each in a fresh interpreter: what a script pays before its
first answer. Our adapters load ``requests`` on first use, so the import figure alone
(:mod:`inprocess`) could hide a cost; this row counts it.

Sprites only (the import target in docs/performance.md is read against its SDK): ``import
managoat_sandbox``, configure, ``get`` one sprite, vs ``import sprites``, a client,
``get_sprite`` — against the same emulator.
"""

from __future__ import annotations

import subprocess
import sys
from functools import partial

from measure import FASTER_THAN_SDK, WAIT, Row, compared, paired
from raw import CREDENTIAL

import managoat_sandbox as sandbox

NAME = "bench-first-call"
OURS = (
    "import time; began = time.perf_counter(); import managoat_sandbox as s; "
    "from managoat_sandbox import config; "
    "config.configure('sprites', token={token!r}, base_url={url!r}); "
    "s.get(s.build_handle('sprites', {name!r})); print(time.perf_counter() - began)"
)
SDK = (
    "import time; began = time.perf_counter(); import sprites; "
    "sprites.SpritesClient({token!r}, base_url={url!r}).get_sprite({name!r}); "
    "print(time.perf_counter() - began)"
)


def _seconds(template: str, url: str) -> float:
    code = template.format(token=CREDENTIAL, url=url, name=NAME)
    return float(subprocess.check_output([sys.executable, "-c", code], timeout=WAIT))


def sprites_rows(url: str, rounds: int) -> list[Row]:
    """The row, against the Sprites emulator at ``url`` (the caller has configured ours)."""
    handle = sandbox.create("sprites", NAME)
    try:
        found = paired(partial(_seconds, OURS, url), partial(_seconds, SDK, url), rounds)
    finally:
        sandbox.destroy(handle)
    return [
        compared(
            "sprites",
            "import + first request vs SDK",
            found,
            unit="ms",
            scale=1000,
            reference_name="SDK",
            kind="import",
            target=FASTER_THAN_SDK,
        )
    ]
