"""How the backend maps Deep Agents' protocol onto the facade, on ``local``."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

import managoat_sandbox as sandbox
from managoat_sandbox.deepagents import INLINE_COMMAND_BYTES, ManagoatSandbox

from .conftest import Target
from .test_standard_suite import SANDBOX_HAS_PYTHON, SANDBOX_PATH


@pytest.fixture
def backend(local_target: Target) -> Iterator[ManagoatSandbox]:
    local_target.point()
    with sandbox.temporary("local", "deepagents-unit") as handle:
        yield ManagoatSandbox(handle)


def test_the_exit_code_is_the_commands_own_and_stderr_is_merged_in_order(
    backend: ManagoatSandbox,
) -> None:
    for code in (0, 3, 255):
        result = backend.execute(f"echo out; echo err >&2; echo again; exit {code}")
        assert (result.output, result.exit_code, result.truncated) == (
            "out\nerr\nagain\n",
            code,
            False,
        )


def test_the_id_names_the_provider_and_the_sandbox(backend: ManagoatSandbox) -> None:
    assert backend.id == f"local:{backend.handle.name}"


def test_a_command_past_its_timeout_has_no_exit_code_and_says_so(
    backend: ManagoatSandbox,
) -> None:
    result = backend.execute("sleep 30", timeout=1)
    assert result.exit_code is None
    assert result.output.startswith("Error: the command did not finish within 1 seconds")
    assert not result.truncated


def test_a_zero_timeout_is_no_limit(backend: ManagoatSandbox) -> None:
    assert backend.execute("exit 4", timeout=0).exit_code == 4


def test_output_past_the_limit_is_truncated_with_no_exit_code(local_target: Target) -> None:
    local_target.point()
    with sandbox.temporary("local", "deepagents-unit") as handle:
        limited = ManagoatSandbox(handle, max_output_bytes=100)
        result = limited.execute("head -c 1000 /dev/zero; exit 0")
        assert (result.exit_code, result.truncated) == (None, True)
        assert "more than 100 bytes" in result.output
        assert limited.execute("printf %s 0123456789").output == "0123456789"


def test_a_long_command_runs_exactly_and_leaves_no_staged_file(
    backend: ManagoatSandbox,
) -> None:
    payload = "x" * (2 * INLINE_COMMAND_BYTES)
    result = backend.execute(f"printf '%s' '{payload}' | wc -c; echo \"$#\" \"it's\"; exit 7")
    assert (result.output, result.exit_code) == (f"{len(payload)}\n0 it's\n", 7)
    assert backend.execute("ls -A /tmp | grep -c managoat-deepagents").output == "0\n"


def test_a_library_failure_is_an_error_response_not_an_exception(
    backend: ManagoatSandbox,
) -> None:
    result = backend.execute("echo \0")  # a NUL cannot be in a command: Invalid
    assert result.exit_code is None
    assert result.output.startswith("Error: the command could not be run: Invalid")


def test_binary_files_round_trip_byte_exact(backend: ManagoatSandbox) -> None:
    data = bytes(range(256)) * 64
    assert [r.error for r in backend.upload_files([("/work/a/b.bin", data)])] == [None]
    [download] = backend.download_files(["/work/a/b.bin"])
    assert (download.content, download.error) == (data, None)
    assert backend.execute("wc -c < /work/a/b.bin").output.strip() == str(len(data))


def test_file_errors_are_the_protocols_codes_per_file_in_order(
    backend: ManagoatSandbox,
) -> None:
    backend.execute("mkdir -p /work/dir && echo s > /work/locked && chmod 000 /work/locked")
    uploads = backend.upload_files([("relative.txt", b"x"), ("/work/ok", b"ok"), ("/usr/x", b"")])
    assert [(r.path, r.error) for r in uploads] == [
        ("relative.txt", "invalid_path"),
        ("/work/ok", None),
        ("/usr/x", "invalid_path"),
    ]
    downloads = backend.download_files(
        ["/work/missing", "/work/dir", "/work/locked", "rel", "/work/ok"]
    )
    assert [(r.path, r.content, r.error) for r in downloads] == [
        ("/work/missing", None, "file_not_found"),
        ("/work/dir", None, "is_directory"),
        ("/work/locked", None, "permission_denied"),
        ("rel", None, "invalid_path"),
        ("/work/ok", b"ok", None),
    ]


def test_the_sandbox_finds_python_exactly_when_the_hosts_path_has_one(
    backend: ManagoatSandbox,
) -> None:
    """The premise of the standard suite's ``python`` xfails."""
    result = backend.execute('printf %s "$PATH"; command -v python >/dev/null')
    assert result.output == SANDBOX_PATH
    assert (result.exit_code == 0) == SANDBOX_HAS_PYTHON


def test_a_python_of_your_own_on_path_is_found(local_target: Target) -> None:
    """The recipe of docs/deepagents.md#getting-a-python."""
    local_target.point()
    with sandbox.temporary("local", "deepagents-unit") as handle:
        setup = ManagoatSandbox(handle).execute(
            'mkdir -p /opt/bin && ln -sf "$(command -v python3)" /opt/bin/python'
        )
        assert setup.exit_code == 0, setup.output
        backend = ManagoatSandbox(handle, env={"PATH": f"/opt/bin:{SANDBOX_PATH}"})
        result = backend.execute("python -c 'print(6 * 7)'")
        assert (result.output, result.exit_code) == ("42\n", 0)


def test_importing_without_deepagents_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['deepagents'] = None\n"
        "try:\n    import managoat_sandbox.deepagents\n"
        "except ImportError as error:\n    print(error)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == (
        'managoat_sandbox.deepagents needs Deep Agents: pip install "managoat-sandbox[deepagents]"'
    )
