"""Whole-tree transfers: ``upload`` and ``download`` per provider, against the raw protocol.

Two payloads, built once per run in a temporary directory with random
(incompressible) content: a tree of many small files, and one large file.
For each provider, each is uploaded and downloaded with our facade (one tar
stream, through one command's stdin or stdout, or staged as one file through
the provider's file API: see docs/protocols/contract.md) and with the raw
protocol's cheapest way to move the same bytes, ours and the reference
alternating, the order rotating every round (as :func:`measure.rotated` does,
the byte check below serving as warm-up):

* hosted, the large file: the provider's own single-file API driven with
  ``requests``, the body streamed both ways (docs/protocols/*.md): Sprites'
  ``PUT …/fs/write`` and ``GET …/fs/read``; E2B envd's ``POST /files`` (a raw
  ``application/octet-stream`` body, which newer envd takes besides
  multipart) and ``GET /files``; Daytona's toolbox ``POST /files/upload``
  (multipart field ``file``, written as a stream) and ``GET /files/download``
  (not in docs/protocols/daytona.md; the emulator serves it, the vendor's
  daemon has it);
* hosted, the tree: that same API file by file, one request per file on one
  pooled connection (what a user without our library would write), the file
  list known beforehand (no listing counted: the floor is the raw side's);
  for Daytona also ``POST /files/bulk-upload`` (every file in streamed
  multipart requests of at most 48 MiB each, the emulator bounding a body at 64)
  and ``POST /files/bulk-download`` (every path in one request, the multipart
  answer parsed as it streams);
* local: no raw path into a bubblewrap sandbox exists, so the reference is a
  plain host copy, ``tar -c | tar -x`` from the source into a host temporary
  directory, for both directions: the floor of moving the bytes at all.

A row shows throughput (the payload's size over the median time, MiB/s) and
the median per-round ratio of the *times* ours/reference with its IQR (below
1: ours faster); its samples (in the JSON) are seconds. Target: ours/raw time
<= 1.25 (the same bar as throughput >= 0.8 of raw). Each remote copy is
replaced in place by the next sample; each local copy a download made is
removed after its sample, outside the timing. Once per provider, before any
timing, each side uploads and downloads the payload and its copies are
compared byte for byte with the source (the "bytes verified" row): ours as
ours uploaded and downloaded it, the raw client's as it did. That round trip
is every call's warm-up; a failed check stops the provider's timing.
"""

from __future__ import annotations

import contextlib
import filecmp
import os
import random
import secrets
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, Protocol

import local_sandbox
import requests
from measure import WAIT, Paired, Row, Target, compared, guarded, rotated
from providers import MIB, PROVIDERS, our_sandbox
from raw import CREDENTIAL, RawDaytona, RawE2B
from served import emulator_process

import managoat_sandbox as sandbox
from managoat_sandbox import Handle

KIB = 1024
#: Time ours/raw; the same bar as throughput ours/raw >= 0.8.
TIME_VS_RAW = Target("ratio", "<=", 1.25, "time ours/raw <= 1.25")
#: The bound on one whole transfer of ours (a single wait stays bounded by ``WAIT``).
TRANSFER_WAIT = 600.0
#: Read and write in pieces of this size.
PIECE = 1 * MIB
#: Where the copies go in a sandbox.
REMOTE = "/tmp/bench-transfer"
HOSTED = ("sprites", "e2b", "daytona")
E2B_USER = "user"
DAYTONA_BOUNDARY = b"DAYTONA-FILE-BOUNDARY"


#: The most file bytes one raw ``bulk-upload`` request carries (the emulators refuse a
#: body over 64 MiB).
BULK_BYTES = 48 * MIB


def _batches(pairs: Sequence[tuple[str, Path]], limit: int) -> Iterator[Sequence[tuple[str, Path]]]:
    """``pairs`` in consecutive batches whose files together stay under ``limit``."""
    batch: list[tuple[str, Path]] = []
    size = 0
    for pair in pairs:
        length = pair[1].stat().st_size
        if batch and size + length > limit:
            yield batch
            batch, size = [], 0
        batch.append(pair)
        size += length
    if batch:
        yield batch


@dataclass(frozen=True)
class Sizes:
    """What the transfer rows move."""

    rounds: int  # pairs per figure
    tree_bytes: int  # the tree's total ...
    smallest: int  # ... in files of this size ...
    largest: int  # ... to this one, uniformly drawn
    per_directory: int  # files per directory of the tree
    file_bytes: int  # the one large file


# -- the payloads -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Payload:
    """The local tree and the large file, under one temporary directory."""

    tree: Path
    file: Path
    files: tuple[str, ...]  # the tree's files, relative, "/"-separated
    tree_bytes: int
    file_bytes: int

    @property
    def tree_name(self) -> str:
        return f"tree {self.tree_bytes / MIB:.0f} MiB, {len(self.files)} files"

    @property
    def file_name(self) -> str:
        return f"one file {self.file_bytes / MIB:.0f} MiB"


@contextlib.contextmanager
def payload(sizes: Sizes) -> Iterator[Payload]:
    """The tree and the file, random content, removed when the block ends."""
    draw = random.Random(20261204)
    with tempfile.TemporaryDirectory(prefix="bench-transfer-") as root:
        tree = Path(root) / "tree"
        files: list[str] = []
        total = 0
        while total < sizes.tree_bytes:
            size = min(draw.randint(sizes.smallest, sizes.largest), sizes.tree_bytes - total)
            index = len(files)
            relative = f"d{index // sizes.per_directory:03d}/f{index:05d}.bin"
            (tree / relative).parent.mkdir(parents=True, exist_ok=True)
            (tree / relative).write_bytes(os.urandom(size))
            files.append(relative)
            total += size
        big = Path(root) / "big.bin"
        with big.open("wb") as out:
            for start in range(0, sizes.file_bytes, PIECE):
                out.write(os.urandom(min(PIECE, sizes.file_bytes - start)))
        yield Payload(tree, big, tuple(files), total, sizes.file_bytes)


def same_tree(source: Path, copy: Path, files: Sequence[str]) -> int:
    """The bytes compared; raises unless ``copy`` holds exactly ``files``, each
    byte-exact."""
    found = sorted(
        path.relative_to(copy).as_posix() for path in copy.rglob("*") if not path.is_dir()
    )
    if found != sorted(files):
        raise RuntimeError(f"{copy}: {len(found)} files where {len(files)} were sent")
    return sum(same_file(source / name, copy / name) for name in files)


def same_file(source: Path, copy: Path) -> int:
    """The bytes compared; raises unless ``copy`` is byte for byte ``source``."""
    if not filecmp.cmp(source, copy, shallow=False):
        raise RuntimeError(f"{copy} differs from {source}")
    return source.stat().st_size


def removed(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def timed(call: Callable[[], object], after: Callable[[], object] = lambda: None) -> float:
    """Seconds one ``call`` took; ``after`` runs untimed."""
    began = time.perf_counter()
    call()
    took = time.perf_counter() - began
    after()
    return took


# -- the raw clients ----------------------------------------------------------------------------


class RawFiles(Protocol):
    """One file in or out of a sandbox through the provider's own file API."""

    def put(self, remote: str, source: Path) -> None: ...
    def get(self, remote: str, target: Path) -> None: ...
    def close(self) -> None: ...


def _save(response: requests.Response, target: Path) -> None:
    """A streamed answer's body into ``target`` (parents made), checked against its
    ``Content-Length`` when it has one."""
    response.raise_for_status()
    target.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with target.open("wb") as out:
        for piece in response.iter_content(chunk_size=PIECE):
            out.write(piece)
            written += len(piece)
    length = response.headers.get("Content-Length")
    if length is not None and int(length) != written:
        raise RuntimeError(f"{target}: {written} of {length} bytes")


class SpritesFiles:
    """``PUT …/fs/write`` and ``GET …/fs/read`` (docs/protocols/sprites.md#files)."""

    def __init__(self, base_url: str, sprite: str) -> None:
        self.fs = f"{base_url}/v1/sprites/{sprite}/fs"
        self.http = requests.Session()
        self.http.headers["Authorization"] = f"Bearer {CREDENTIAL}"

    def put(self, remote: str, source: Path) -> None:
        params = {"path": remote, "workingDir": "/", "mode": "0644", "mkdirParents": "true"}
        with source.open("rb") as body:
            self.http.put(
                f"{self.fs}/write",
                params=params,
                data=body,
                headers={"Content-Type": "application/octet-stream"},
                timeout=WAIT,
            ).raise_for_status()

    def get(self, remote: str, target: Path) -> None:
        with self.http.get(
            f"{self.fs}/read",
            params={"path": remote, "workingDir": "/"},
            headers={"Accept-Encoding": "identity"},
            stream=True,
            timeout=WAIT,
        ) as response:
            _save(response, target)

    def close(self) -> None:
        self.http.close()


class E2BFiles:
    """envd's ``POST /files`` (raw body) and ``GET /files`` (docs/protocols/e2b.md#files-api),
    in a sandbox of its own."""

    def __init__(self, base_url: str) -> None:
        self.client = RawE2B(base_url)
        self.url = f"{base_url}/files"
        self.headers = {
            key: value for key, value in self.client.headers.items() if key != "Content-Type"
        }

    def put(self, remote: str, source: Path) -> None:
        with source.open("rb") as body:
            self.client.http.post(
                self.url,
                params={"path": remote, "username": E2B_USER},
                data=body,
                headers={**self.headers, "Content-Type": "application/octet-stream"},
                timeout=WAIT,
            ).raise_for_status()

    def get(self, remote: str, target: Path) -> None:
        with self.client.http.get(
            self.url,
            params={"path": remote, "username": E2B_USER},
            headers={**self.headers, "Accept-Encoding": "identity"},
            stream=True,
            timeout=WAIT,
        ) as response:
            _save(response, target)

    def close(self) -> None:
        self.client.close()


def _multipart(boundary: bytes, parts: Iterable[tuple[str, bytes | Path]]) -> Iterator[bytes]:
    """A ``multipart/form-data`` body as it is written: ``(field, value)`` parts, a
    ``Path`` value sent as a file part, read in pieces."""
    for field, value in parts:
        disposition = f'form-data; name="{field}"'
        if isinstance(value, Path):
            disposition += f'; filename="{value.name}"'
        yield b"--" + boundary + b"\r\nContent-Disposition: " + disposition.encode()
        if isinstance(value, bytes):
            yield b"\r\n\r\n" + value + b"\r\n"
            continue
        yield b"\r\nContent-Type: application/octet-stream\r\n\r\n"
        with value.open("rb") as source:
            while piece := source.read(PIECE):
                yield piece
        yield b"\r\n"
    yield b"--" + boundary + b"--\r\n"


class DaytonaFiles:
    """The toolbox's ``POST /files/upload`` and ``GET /files/download``, and its bulk
    calls (docs/protocols/daytona.md#files), in a sandbox of its own."""

    def __init__(self, base_url: str) -> None:
        self.client = RawDaytona(base_url + "/api", "bench-raw-files")
        self.files = self.client.toolbox + "/files"

    def _post_multipart(
        self, url: str, parts: Iterable[tuple[str, bytes | Path]], **kw: Any
    ) -> None:
        boundary = secrets.token_hex(16).encode()
        self.client.http.post(
            url,
            data=_multipart(boundary, parts),
            headers={"Content-Type": f"multipart/form-data; boundary={boundary.decode()}"},
            timeout=WAIT,
            **kw,
        ).raise_for_status()

    def put(self, remote: str, source: Path) -> None:
        self._post_multipart(f"{self.files}/upload", [("file", source)], params={"path": remote})

    def get(self, remote: str, target: Path) -> None:
        with self.client.http.get(
            f"{self.files}/download", params={"path": remote}, stream=True, timeout=WAIT
        ) as response:
            _save(response, target)

    def bulk_put(self, pairs: Sequence[tuple[str, Path]]) -> None:
        """Every ``(remote, source)`` through ``bulk-upload``, each path part before its
        file part: in as few requests as keep each body under :data:`BULK_BYTES` (the
        emulator, like any service, bounds a request's body)."""
        for batch in _batches(pairs, BULK_BYTES):

            def parts(
                batch: Sequence[tuple[str, Path]] = batch,
            ) -> Iterator[tuple[str, bytes | Path]]:
                for index, (remote, source) in enumerate(batch):
                    yield f"files[{index}].path", remote.encode()
                    yield f"files[{index}].file", source

            self._post_multipart(f"{self.files}/bulk-upload", parts())

    def bulk_get(self, pairs: Sequence[tuple[str, Path]]) -> None:
        """Every ``(remote, target)`` in one ``bulk-download`` request; its multipart
        answer (fixed boundary) cut into the files as it streams."""
        targets = dict(pairs)
        with self.client.http.post(
            f"{self.files}/bulk-download",
            json={"paths": list(targets)},
            headers={"Accept": "multipart/form-data"},
            stream=True,
            timeout=WAIT,
        ) as response:
            response.raise_for_status()
            written = _split_parts(response.iter_content(chunk_size=PIECE), targets)
        if written != len(targets):
            raise RuntimeError(f"bulk-download: {written} of {len(targets)} files")

    def close(self) -> None:
        self.client.close()


def _filename(headers: bytes) -> str:
    for line in headers.split(b"\r\n"):
        name, _, value = line.decode("utf-8", "replace").partition(":")
        if name.strip().lower() != "content-disposition":
            continue
        if 'name="error"' in value:
            raise RuntimeError(f"bulk-download error part: {value.strip()}")
        marker = 'filename="'
        start = value.find(marker)
        if start >= 0:
            return value[start + len(marker) : value.index('"', start + len(marker))]
    raise RuntimeError("bulk-download part without a filename")


def _split_parts(pieces: Iterable[bytes], targets: dict[str, Path]) -> int:
    """Write each part of a multipart body to ``targets[its filename]``; the count.

    Each part ends where ``\\r\\n--BOUNDARY`` begins; the bytes that might begin one
    are held back until the next piece tells."""
    delimiter = b"\r\n--" + DAYTONA_BOUNDARY
    buffer = b"\r\n"  # the first delimiter has no CRLF of its own
    out: BinaryIO | None = None
    count = 0
    try:
        for piece in pieces:
            buffer += piece
            while True:
                if out is None:  # between parts: a delimiter, then headers
                    end = buffer.find(b"\r\n\r\n", len(delimiter))
                    if not buffer.startswith(delimiter) or end < 0:
                        if buffer.startswith(delimiter + b"--"):
                            return count
                        break
                    target = targets[_filename(buffer[len(delimiter) : end])]
                    target.parent.mkdir(parents=True, exist_ok=True)
                    out = target.open("wb")
                    buffer = buffer[end + 4 :]
                at = buffer.find(delimiter)
                if at < 0:
                    keep = len(delimiter) - 1
                    out.write(buffer[:-keep])
                    buffer = buffer[-keep:]
                    break
                out.write(buffer[:at])
                out.close()
                out = None
                count += 1
                buffer = buffer[at:]
        if out is None and buffer.startswith(delimiter + b"--"):
            return count
        raise RuntimeError("bulk-download answer ended inside a part")
    finally:
        if out is not None:
            out.close()


def raw_files(provider: str, base_url: str, handle: Handle) -> RawFiles:
    """The provider's raw file client (Sprites' on our sprite, as :mod:`raw` does)."""
    if provider == "sprites":
        return SpritesFiles(base_url, handle.name)
    if provider == "e2b":
        return E2BFiles(base_url)
    return DaytonaFiles(base_url)


# -- the local floor ----------------------------------------------------------------------------


def host_copy(source: Path, target: Path) -> None:
    """``tar -c | tar -x`` of ``source`` (a directory's contents, or one file) into
    ``target``."""
    if source.is_dir():
        target.mkdir(parents=True, exist_ok=True)
        directory, what = source, "."
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        directory, what = source.parent, source.name
    packed = subprocess.Popen(
        ["tar", "-c", "-f", "-", "-C", str(directory), what], stdout=subprocess.PIPE
    )
    assert packed.stdout is not None
    unpacked = subprocess.run(
        ["tar", "-x", "-f", "-", "-C", str(target if source.is_dir() else target.parent)],
        stdin=packed.stdout,
        check=False,
        timeout=TRANSFER_WAIT,
    )
    packed.stdout.close()
    if packed.wait(TRANSFER_WAIT) or unpacked.returncode:
        raise RuntimeError(f"tar | tar of {source} failed")
    if source.is_file() and source.name != target.name:
        (target.parent / source.name).rename(target)


# -- the rows -----------------------------------------------------------------------------------


def _row(section: str, measurement: str, found: Paired, *, size: int, reference_name: str) -> Row:
    """A row of times ``found`` shown as throughput; its ratio the time ratio."""
    row = compared(
        section,
        measurement,
        found,
        unit="s",
        scale=1,
        reference_name=reference_name,
        kind="transfer",
        target=TIME_VS_RAW,
    )
    row.unit = "MiB/s"
    row.ours = size / MIB / statistics.median(found.ours)
    row.reference = size / MIB / statistics.median(found.reference)
    return row


@dataclass(frozen=True)
class Side:
    """How one side (ours or a reference) moves the payload: four calls, a download
    writing the copy at the path it is given. A side that differs from another only
    for the tree (``tree_only``) is not measured again for the file."""

    up_tree: Callable[[], object]
    down_tree: Callable[[Path], object]
    up_file: Callable[[], object]
    down_file: Callable[[Path], object]
    tree_only: bool = False


def measure(
    section: str,
    data: Payload,
    *,
    rounds: int,
    ours: Side,
    references: Sequence[tuple[str, Side]],
    scratch: Path,
) -> list[Row]:
    """The byte check of each side's round trip (which is also every call's warm-up),
    then upload and download rows of the tree and the file, ours against each
    reference. A failed check leaves no rows but its error: nothing is timed on
    copies that are not exact."""
    sides = [("ours", ours), *references]

    def verified() -> list[Row]:
        checked: list[str] = []
        total = 0
        for name, side in sides:
            tree, big = scratch / "check-tree", scratch / "check-file"
            try:
                side.up_tree()
                side.down_tree(tree)
                total += same_tree(data.tree, tree, data.files)
                if not side.tree_only:
                    side.up_file()
                    side.down_file(big)
                    total += same_file(data.file, big)
            finally:
                removed(tree)
                removed(big)
            checked.append(name)
        return [
            Row(
                section,
                "bytes verified (round trips)",
                unit="MiB",
                ours=total / MIB,
                note="byte-exact: " + ", ".join(checked),
            )
        ]

    rows = guarded(section, "bytes verified", verified)
    if rows[0].error:
        return rows

    def up(call: Callable[[], object]) -> Callable[[], float]:
        return lambda: timed(call)

    def down(call: Callable[[Path], object], what: str) -> Callable[[], float]:
        target = scratch / what

        def sample() -> float:
            removed(target)
            return timed(lambda: call(target), lambda: removed(target))

        return sample

    plans: list[tuple[str, int, bool, Callable[[Side], Callable[[], float]]]] = [
        (f"upload {data.tree_name}", data.tree_bytes, True, lambda s: up(s.up_tree)),
        (f"download {data.tree_name}", data.tree_bytes, True, lambda s: down(s.down_tree, "tree")),
        (f"upload {data.file_name}", data.file_bytes, False, lambda s: up(s.up_file)),
        (f"download {data.file_name}", data.file_bytes, False, lambda s: down(s.down_file, "f")),
    ]
    for measurement, size, tree, sample in plans:
        taken = [(name, side) for name, side in references if tree or not side.tree_only]

        def group(
            measurement: str = measurement,
            size: int = size,
            sample: Callable[[Side], Callable[[], float]] = sample,
            taken: list[tuple[str, Side]] = taken,
        ) -> list[Row]:
            found = rotated(
                [sample(ours), *(sample(side) for _, side in taken)], rounds, warm_up=False
            )
            return [
                _row(
                    section, measurement, Paired(found[0], found[n]), size=size, reference_name=name
                )
                for n, (name, _) in enumerate(taken, start=1)
            ]

        rows += guarded(section, measurement, group)
    return rows


def ours_side(handle: Handle, data: Payload, tag: str) -> Side:
    remote_tree, remote_file = f"{REMOTE}/{tag}-tree", f"{REMOTE}/{tag}-file.bin"

    def up(local: Path, remote: str) -> Callable[[], object]:
        return lambda: sandbox.upload(handle, local, remote, timeout=TRANSFER_WAIT)

    def down(remote: str) -> Callable[[Path], object]:
        return lambda target: sandbox.download(handle, remote, target, timeout=TRANSFER_WAIT)

    return Side(
        up(data.tree, remote_tree), down(remote_tree), up(data.file, remote_file), down(remote_file)
    )


def raw_side(client: RawFiles, data: Payload, tag: str) -> Side:
    """The file API, one request per file of the tree."""
    remote_tree, remote_file = f"{REMOTE}/{tag}-tree", f"{REMOTE}/{tag}-file.bin"

    def up_tree() -> None:
        for name in data.files:
            client.put(f"{remote_tree}/{name}", data.tree / name)

    def down_tree(target: Path) -> None:
        for name in data.files:
            client.get(f"{remote_tree}/{name}", target / name)

    return Side(
        up_tree,
        down_tree,
        lambda: client.put(remote_file, data.file),
        lambda target: client.get(remote_file, target),
    )


def bulk_side(client: DaytonaFiles, data: Payload, tag: str) -> Side:
    """Daytona's bulk calls for the tree (one request each way), single-file for the file."""
    remote_tree, remote_file = f"{REMOTE}/{tag}-tree", f"{REMOTE}/{tag}-file.bin"
    return Side(
        lambda: client.bulk_put(
            [(f"{remote_tree}/{name}", data.tree / name) for name in data.files]
        ),
        lambda target: client.bulk_get(
            [(f"{remote_tree}/{name}", target / name) for name in data.files]
        ),
        lambda: client.put(remote_file, data.file),
        lambda target: client.get(remote_file, target),
        tree_only=True,
    )


def local_rows(data: Payload, rounds: int, scratch: Path) -> list[Row]:
    """Ours in a local sandbox against ``tar | tar`` on the host (the floor)."""
    section = "transfer local"
    with local_sandbox.local_root(), sandbox.temporary("local", "bench-transfer") as handle:
        copies = scratch / "host-copies"
        floor = Side(
            lambda: host_copy(data.tree, copies / "tree"),
            lambda target: host_copy(data.tree, target),
            lambda: host_copy(data.file, copies / "big.bin"),
            lambda target: host_copy(data.file, target),
        )
        try:
            return measure(
                section,
                data,
                rounds=rounds,
                ours=ours_side(handle, data, "ours"),
                references=[("host tar|tar", floor)],
                scratch=scratch,
            )
        finally:
            removed(copies)


def hosted_rows(provider: str, data: Payload, rounds: int, scratch: Path) -> list[Row]:
    """Ours against the raw file API (and Daytona's bulk calls), on a child-process emulator."""
    section = f"transfer {provider}"
    with emulator_process(provider) as served:
        PROVIDERS[provider].point(served.base_url)
        with our_sandbox(provider, "bench-transfer") as handle:
            client = raw_files(provider, served.base_url, handle)
            try:
                references = [("raw per file", raw_side(client, data, "raw"))]
                if isinstance(client, DaytonaFiles):
                    references.append(("raw bulk", bulk_side(client, data, "bulk")))
                return measure(
                    section,
                    data,
                    rounds=rounds,
                    ours=ours_side(handle, data, "ours"),
                    references=references,
                    scratch=scratch,
                )
            finally:
                with contextlib.suppress(Exception):
                    client.close()


def rows(sizes: Sizes, providers: Sequence[str] = ("local", *HOSTED)) -> list[Row]:
    """The transfer rows of each provider; the payload built once."""
    found: list[Row] = []
    with payload(sizes) as data, tempfile.TemporaryDirectory(prefix="bench-transfer-out-") as out:
        scratch = Path(out)
        for provider in providers:
            if provider == "local":
                found += guarded(
                    "transfer local", "sandbox", lambda: local_rows(data, sizes.rounds, scratch)
                )
            else:
                found += guarded(
                    f"transfer {provider}",
                    "emulator",
                    partial(hosted_rows, provider, data, sizes.rounds, scratch),
                )
    return found
