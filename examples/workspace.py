"""A workspace round trip: upload a project, test it in a sandbox, download the reports.

Builds a tiny Python project in a temporary directory (a module and a
``unittest`` test of it), copies it into a fresh sandbox with
``sandbox.upload``, runs its tests there with ``python3 -m unittest`` writing
the report under ``reports/``, copies ``reports/`` back with
``sandbox.download``, prints it, and exits with the tests' own status. Both
copies report their progress through a callback.

Run it (nothing is written outside a temporary directory, and the sandbox is
destroyed at the end)::

    python examples/workspace.py            # on local
    python examples/workspace.py e2b        # any provider with python3 in its sandboxes
"""

from __future__ import annotations

import pathlib
import sys
import tempfile
from collections.abc import Callable

import managoat_sandbox as sandbox
from managoat_sandbox import TransferProgress

PROVIDER = sys.argv[1] if len(sys.argv) > 1 else "local"
REMOTE = "/work/project"  # where the project lives in the sandbox

MODULE = '''"""A module worth testing."""


def add(a: int, b: int) -> int:
    return a + b
'''

TEST = """import unittest

from calc import add


class AddTest(unittest.TestCase):
    def test_adds(self) -> None:
        self.assertEqual(add(2, 3), 5)

    def test_is_commutative(self) -> None:
        self.assertEqual(add(1, 4), add(4, 1))
"""

# Run the tests, their verbose report going to reports/unittest.txt; bash exits
# with unittest's status (0: every test passed).
RUN_TESTS = "mkdir -p reports && python3 -m unittest discover -v 2> reports/unittest.txt"


def show_progress(what: str) -> Callable[[TransferProgress], None]:
    """A progress callback for ``what``: called after each file and every MiB."""

    def progress(p: TransferProgress) -> None:
        total = f" of {p.bytes_total}" if p.bytes_total is not None else ""
        print(f"{what}: {p.files} files, {p.bytes}{total} bytes")

    return progress


def build_project(where: pathlib.Path) -> pathlib.Path:
    """Write the tiny project under ``where``; its directory."""
    project = where / "project"
    project.mkdir()
    (project / "calc.py").write_text(MODULE)
    (project / "test_calc.py").write_text(TEST)
    return project


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="workspace-") as scratch:
        local = pathlib.Path(scratch)
        project = build_project(local)
        with sandbox.temporary(PROVIDER, prefix="workspace") as handle:
            sent = sandbox.upload(handle, project, REMOTE, progress=show_progress("upload"))
            print(f"uploaded {sent.files} files ({sent.bytes} bytes) to {REMOTE}")

            result = sandbox.exec(handle, "bash", ["-c", RUN_TESTS], dir=REMOTE, timeout=120)
            print(f"tests exited {result.exit_code}")

            got = sandbox.download(
                handle, f"{REMOTE}/reports", local / "reports", progress=show_progress("download")
            )
            print(f"downloaded {got.files} report file(s)")
        # The sandbox is gone; the reports are here.
        for report in sorted((local / "reports").rglob("*")):
            if report.is_file():
                print(f"--- {report.relative_to(local)} ---")
                print(report.read_text(), end="")
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
