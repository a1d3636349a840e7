"""``_readers.Readers``: a reader thread kept a moment after its work reads the next one
(no thread started), takes that work's name, lets go of it when done, and ends once
it has waited ``linger`` seconds for nothing; and a ``Stream`` started on readers
joins its pump rather than a thread."""

from __future__ import annotations

import threading
from collections.abc import Callable

from managoat_sandbox._readers import Readers
from managoat_sandbox._streaming import Stream

from .conftest import wait_until

IDLE = "test-reader-idle"


def _named(prefix: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(prefix)]


def _recorder(seen: list[tuple[str, int]]) -> Callable[[], None]:
    def work() -> None:
        seen.append((threading.current_thread().name, threading.get_ident()))

    return work


def test_a_waiting_reader_takes_the_next_work_under_its_name_and_lets_go_of_it() -> None:
    readers = Readers(60.0, idle_name=IDLE)
    seen: list[tuple[str, int]] = []
    assert readers.run("test-reader-one", _recorder(seen)).wait(5)
    assert wait_until(lambda: [t.name for t in _named("test-reader-")] == [IDLE])
    assert readers.run("test-reader-two", _recorder(seen)).wait(5)
    (first, thread), (second, again) = seen
    assert (first, second) == ("test-reader-one", "test-reader-two")
    assert again == thread, "the second work ran on the reader kept from the first"
    assert wait_until(lambda: [t.name for t in _named("test-reader-")] == [IDLE])


def test_a_reader_given_nothing_for_its_linger_ends() -> None:
    readers = Readers(0.05, idle_name="test-linger-idle")
    assert readers.run("test-linger-work", lambda: None).wait(5)
    assert wait_until(lambda: not _named("test-linger-"), timeout=10)
    seen: list[tuple[str, int]] = []
    assert readers.run("test-linger-again", _recorder(seen)).wait(5)
    assert seen[0][0] == "test-linger-again"
    assert wait_until(lambda: not _named("test-linger-"), timeout=10)


def test_works_running_at_once_get_readers_of_their_own() -> None:
    readers = Readers(0.05, idle_name="test-many-idle")
    release = threading.Event()
    running: list[int] = []
    started = threading.Barrier(4)

    def work() -> None:
        running.append(threading.get_ident())
        started.wait(5)
        release.wait(5)

    done = [readers.run(f"test-many-{n}", work) for n in range(3)]
    started.wait(5)
    assert len(set(running)) == 3
    release.set()
    assert all(event.wait(5) for event in done)
    assert wait_until(lambda: not _named("test-many-"), timeout=10)


def test_a_work_that_raises_still_signals_its_end_and_its_reader_ends() -> None:
    readers = Readers(60.0, idle_name="test-raise-idle")
    errors: list[BaseException] = []
    previous = threading.excepthook
    threading.excepthook = lambda args: errors.append(args.exc_value)  # type: ignore[assignment]
    try:

        def boom() -> None:
            raise RuntimeError("boom")

        assert readers.run("test-raise-work", boom).wait(5)
        assert wait_until(lambda: not _named("test-raise-"), timeout=10)
    finally:
        threading.excepthook = previous
    assert [type(error) for error in errors] == [RuntimeError]


def test_a_stream_on_readers_joins_its_pump_and_not_from_inside_it() -> None:
    readers = Readers(0.05, idle_name="test-stream-idle")
    joined_inside = threading.Event()
    stream: Stream

    def owner(frame: object) -> None:
        stream.join(5)  # from the reader itself: returns at once
        joined_inside.set()

    go = threading.Event()

    def pump(s: Stream) -> None:
        go.wait(5)
        s.exit(0)

    stream = Stream("ref-1", owner, label="test-stream")
    stream.start(pump, readers=readers)
    assert [t.name for t in _named("test-stream-")] == ["test-stream-ref-1"]
    go.set()
    stream.join(5)
    assert joined_inside.is_set() and stream.finished.is_set()
    assert wait_until(lambda: not _named("test-stream-ref-1"))
