"""envd's ``end`` event read as the contract reports an end: its exit code, and 128 + N
for a process signal N killed (envd says ``exitCode`` -1 and ``status``
``"signal: <Go's name of the signal>"``)."""

from __future__ import annotations

import signal
import sys

import pytest

from managoat_sandbox._engine import events
from managoat_sandbox.emulators.e2b.processes import end_event
from managoat_sandbox.providers.e2b.ends import exit_code


@pytest.mark.parametrize(
    ("end", "code"),
    [
        ({"exited": True, "status": "exit status 0"}, 0),
        ({"exitCode": 3, "exited": True, "status": "exit status 3"}, 3),
        ({"exitCode": -1, "status": "signal: killed", "error": "signal: killed"}, 137),
        ({"exitCode": -1, "status": "signal: terminated"}, 143),
        ({"exitCode": -1, "status": "signal: segmentation fault (core dumped)"}, 139),
        ({"exitCode": -1, "status": "signal: CPU time limit exceeded"}, 152),
        ({"exitCode": -1, "status": "signal: signal 34"}, 162),
    ],
)
def test_an_end_reports_its_code_and_a_signal_death_as_128_plus_the_signal(
    end: dict[str, object], code: int
) -> None:
    assert exit_code(end) == code


@pytest.mark.parametrize(
    "end",
    [
        {"exitCode": -1, "status": "unknown", "error": "process state lost"},
        {"exitCode": -1, "status": "signal: no such signal"},
        {"exitCode": -1, "status": "signal: signal 300"},
        {"exitCode": -1},
    ],
)
def test_an_end_naming_no_known_signal_keeps_envd_s_code(end: dict[str, object]) -> None:
    assert exit_code(end) == -1


def test_an_exited_process_is_never_read_as_a_signal_death() -> None:
    assert exit_code({"exitCode": 2, "exited": True, "status": "signal: killed"}) == 2


@pytest.mark.parametrize("end", [None, [], {"exitCode": True}, {"exitCode": "3"}])
def test_a_malformed_end_is_code_0_as_an_absent_code_is(end: object) -> None:
    assert exit_code(end) == 0


@pytest.mark.skipif(sys.platform != "linux", reason="the emulator names signals as Linux does")
@pytest.mark.parametrize("signum", range(1, 32))
def test_every_signal_the_emulator_reports_reads_back_as_128_plus_its_number(signum: int) -> None:
    end = end_event(events.Exited(128 + signum, signum))
    assert end["exitCode"] == -1 and str(end["status"]).startswith("signal: "), end
    assert exit_code(end) == 128 + signum, signal.strsignal(signum)
