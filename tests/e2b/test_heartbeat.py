"""TTL heartbeats (``providers/e2b/heartbeat.py``): renewals only while a command lives,
one thread for commands that follow each other, and no thread left once they are over."""

from __future__ import annotations

import threading
import time

from managoat_sandbox.providers.e2b.heartbeat import Heartbeats

from ..conftest import wait_until


def _beat_threads(sandbox_id: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"e2b-heartbeat-{sandbox_id}"]


def test_commands_one_after_another_share_one_heartbeat_thread() -> None:
    beats = Heartbeats(60.0, linger=1.0)
    release = beats.hold("sbx-seq", lambda: None)
    [first] = _beat_threads("sbx-seq")
    release()
    release = beats.hold("sbx-seq", lambda: None)
    assert _beat_threads("sbx-seq") == [first]
    release()
    assert wait_until(lambda: not _beat_threads("sbx-seq"), timeout=10)


def test_a_lingering_thread_sends_nothing_and_then_ends() -> None:
    beats = Heartbeats(0.02, linger=0.5)
    released = threading.Event()
    after_release: list[bool] = []
    renewing = threading.Event()

    def send() -> None:
        after_release.append(released.is_set())
        renewing.set()

    release = beats.hold("sbx-linger", send)
    assert renewing.wait(5)
    release()
    released.set()
    assert wait_until(lambda: not _beat_threads("sbx-linger"), timeout=5)
    # One renewal decided just before the release may still start after it; a thread
    # that went on renewing while it lingered would have sent about 25 more.
    assert after_release.count(True) <= 1


def test_a_command_held_while_the_thread_lingers_is_renewed_with_its_own_send() -> None:
    beats = Heartbeats(0.05, linger=1.0)
    release = beats.hold("sbx-again", lambda: None)
    release()
    renewed = threading.Event()
    release = beats.hold("sbx-again", renewed.set)
    assert renewed.wait(5)
    release()
    assert wait_until(lambda: not _beat_threads("sbx-again"), timeout=10)


def test_commands_held_while_the_thread_lingers_do_not_wake_it() -> None:
    """A wakeup costs the command as much as it costs the thread: one held and
    released while the thread lingers (its wait ends before anything is due) sets
    no wake; one released while the thread waits for a renewal wakes it to linger."""
    beats = Heartbeats(60.0, linger=30.0)
    release = beats.hold("sbx-quiet", lambda: None)
    release()
    beat = beats._beats["sbx-quiet"]
    assert wait_until(lambda: beat.wakes_at > 0 and not beat.wake.is_set())
    wakes: list[None] = []
    real_set = beat.wake.set

    def counted() -> None:
        wakes.append(None)
        real_set()

    beat.wake.set = counted  # type: ignore[method-assign]
    for _ in range(5):
        beats.hold("sbx-quiet", lambda: None)()
    assert wakes == []
    # As if the thread waited past the end of a linger (for a renewal 45 s away): the
    # hold (its renewal due in 60 s) needs no wake, the release (a 30 s linger) does.
    beat.wakes_at = time.monotonic() + 45.0
    beats.hold("sbx-quiet", lambda: None)()
    assert len(wakes) == 1
    beat.idle_until = 0.0  # let the thread go now rather than in 30 s
    real_set()
    assert wait_until(lambda: not _beat_threads("sbx-quiet"), timeout=10)
