"""Guardrail: no test marked to run in parallel writes the process-global configuration.

Configuration is process-global. A test module that declares itself safe to
run concurrently (``pytestmark = pytest.mark.parallel_safe``) must not call
``config.configure``, ``config.override`` or ``config.reset``; such tests
belong in a serial module.
"""

from __future__ import annotations

import re
from pathlib import Path

PARALLEL = re.compile(r"^\s*pytestmark\s*=.*parallel_safe", re.MULTILINE)
WRITES = re.compile(r"\bconfig\.(configure|override|reset)\(")


def offenders(root: Path) -> tuple[list[Path], list[str]]:
    files = sorted(p for p in root.rglob("test_*.py") if p.name != Path(__file__).name)
    bad = []
    for path in files:
        text = path.read_text()
        code = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
        if PARALLEL.search(text) and any(WRITES.search(line) for line in code):
            bad.append(str(path))
    return files, bad


def test_no_parallel_marked_test_writes_global_config() -> None:
    files, bad = offenders(Path(__file__).parent)
    assert files, "the guardrail found no test files — it would pass over anything"
    assert bad == [], f"move config-writing tests out of parallel-safe modules: {bad}"


def test_the_guardrail_catches_an_offender(tmp_path: Path) -> None:
    (tmp_path / "test_bad.py").write_text(
        "import pytest\npytestmark = pytest.mark.parallel_safe\n"
        "def test_x():\n    config.configure('sprites', token='t')\n"
    )
    (tmp_path / "test_ok.py").write_text(
        "import pytest\npytestmark = pytest.mark.parallel_safe\n"
        "def test_y():\n    # config.configure('x')\n    pass\n"
    )
    _, bad = offenders(tmp_path)
    assert [Path(b).name for b in bad] == ["test_bad.py"]
