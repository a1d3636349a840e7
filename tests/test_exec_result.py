"""ExecResult: two-element unpacking, and the command's stderr carried beside it."""

from __future__ import annotations

import copy
import pickle

import pytest

import managoat_sandbox as sandbox
from managoat_sandbox import ExecResult


def test_unpacks_and_compares_as_output_and_code() -> None:
    result = ExecResult(b"out", 3, b"err")
    output, code = result
    assert (output, code) == (b"out", 3)
    assert result == (b"out", 3)
    assert len(result) == 2


def test_stderr_defaults_to_empty() -> None:
    assert ExecResult(b"out", 0).stderr == b""


def test_stderr_survives_copy_pickle_and_replace() -> None:
    result = ExecResult(b"out", 1, b"why")
    assert copy.copy(result).stderr == b"why"
    assert copy.deepcopy(result).stderr == b"why"
    assert pickle.loads(pickle.dumps(result)).stderr == b"why"
    replaced = result._replace(exit_code=2)
    assert (replaced.exit_code, replaced.stderr) == (2, b"why")
    with pytest.raises(ValueError):
        result._replace(nonsense=1)


def test_repr_shows_stderr() -> None:
    assert "stderr=b'why'" in repr(ExecResult(b"", 1, b"why"))


def test_facade_exec_returns_the_commands_stderr() -> None:
    handle = sandbox.create("fake", "exec-result-stderr")
    try:
        result = sandbox.exec(handle, "emit", ["out:seen", "err:the reason", "exit:1"])
        assert (result.output, result.exit_code, result.stderr) == (b"seen", 1, b"the reason")
        merged = sandbox.exec(handle, "emit", ["out:seen", "err:the reason"], stderr_to_stdout=True)
        assert (merged.output, merged.stderr) == (b"seenthe reason", b"")
    finally:
        sandbox.destroy(handle)
