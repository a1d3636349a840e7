"""Shared fixtures: a clean library configuration around every test, and the secrets canary.

Configuration is process-global; the suite runs its tests one at a time, so a
test may write it (``clean_config`` resets it around every test).

The canary (:mod:`tests.canary`) is installed for the whole session: every
hosted adapter's credential is :data:`tests.canary.CANARY`, and a test in
whose logs, errors, value reprs or report the token shows up fails.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any
from unittest import mock

import pytest
import urllib3

from managoat_sandbox import config

from .canary import CANARY, Watch

WATCH = Watch()


def pytest_configure(config: pytest.Config) -> None:
    WATCH.install()


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """How many workers ``-n auto`` starts: one and a half per core. Much of the suite
    waits on processes (sandboxes, emulators, CLI runs), so more workers than cores
    keep the cores busy — on 2 cores, 3 workers ran it in 2:28-2:33, 2 in 2:52-3:01
    (4 made a timing-sensitive test flaky)."""
    cores = os.cpu_count() or 1
    return max(1, cores + cores // 2)


def pytest_unconfigure(config: pytest.Config) -> None:
    WATCH.uninstall()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item,
    call: pytest.CallInfo[None],
) -> Generator[None, Any, None]:
    """Fail a test whose report (failure text, captured output or logs) holds the canary."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    sections = [("the failure text", report.longreprtext), *report.sections]
    found = WATCH.sightings_in_report(sections)
    if found:
        original = report.longreprtext.replace(CANARY, "<the canary>")
        report.outcome = "failed"
        report.longrepr = f"the secrets canary appeared in: {', '.join(found)}\n\n{original}"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Sightings no test owned (a background thread after its test ended) fail the run."""
    late = WATCH.take()
    if late:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(
                f"the secrets canary appeared after its test ended in: {late}",
                red=True,
            )


@pytest.fixture(autouse=True)
def secrets_canary() -> Iterator[None]:
    """Fail the test if the canary was seen in a log record, an error or a value's repr."""
    yield
    found = WATCH.take()
    if found:
        where = ", ".join(sorted(set(found)))
        pytest.fail(f"the secrets canary appeared in: {where}", pytrace=False)


@pytest.fixture(autouse=True)
def clean_config() -> Iterator[None]:
    """Reset configuration, with fast retries (1 ms base) as the original's test helper did."""
    config.reset()
    config.configure("retry", base_ms=1, max_ms=5)
    yield
    config.reset()


@contextlib.contextmanager
def counted_connects() -> Iterator[list[object]]:
    """The HTTP connections urllib3 connects (or reconnects) while the block runs, in
    order. A pool keeps a dropped connection's object and reconnects it on its next use,
    so connects are what counts, not new connection objects."""
    connects: list[object] = []
    real = urllib3.connection.HTTPConnection.connect

    def counting(connection: urllib3.connection.HTTPConnection) -> None:
        connects.append(connection)
        real(connection)

    with mock.patch.object(urllib3.connection.HTTPConnection, "connect", counting):
        yield connects


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0, step: float = 0.01) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` seconds have passed; its last answer.

    The one way a test waits for something to happen. The deadline is elapsed
    monotonic time from the call, however long each poll takes (a slow
    predicate cannot stretch it); ``step`` is only the pause between polls.
    The predicate is asked once more at the deadline, so a condition that
    became true during the last pause is still seen.
    """
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        left = deadline - time.monotonic()
        if left <= 0:
            return predicate()
        pause.wait(min(step, left))
    return True
