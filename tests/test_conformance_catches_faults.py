"""The conformance suite can fail: each mutant of the Fake breaks one promise.

Every case runs one conformance test against the plain Fake (it must pass:
the control) and against a mutant that breaks exactly the promise that test
names (it must fail with an assertion, not crash with an unrelated error).
"""

from __future__ import annotations

import logging
import os
import posixpath
import unittest
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import pytest

from managoat_sandbox import reasons
from managoat_sandbox.contract import Capability, Owner
from managoat_sandbox.errors import (
    CommandExited,
    DeadlineExpired,
    Invalid,
    NotFound,
    NotSupported,
    Unavailable,
)
from managoat_sandbox.frames import Error, Exit, Frame, Stdout
from managoat_sandbox.testing.conformance import ConformanceTests
from managoat_sandbox.testing.fake import Fake
from managoat_sandbox.types import Command, ExecResult, Handle, Session, TransferProgress

from .test_fake_conformance import FAKE_FIXTURES, another_world

#: Short frame waits keep the failing runs (which wait out their timeouts) fast.
PROBE_FRAME_TIMEOUT = 0.3
#: How much stdout :class:`ExitOvertakesHeldOutput` holds before it delivers any.
HELD_BLOCK = 64 * 1024
#: The Fake's fixtures plus those only these probes need: a script has no background
#: child, so "late" is what comes after a pause (the part a mutant drops), and the
#: Fake's merge keeps the script's order.
PROBE_FIXTURES: dict[str, Sequence[Any]] = {
    **FAKE_FIXTURES,
    "exec_late_child": ("emit", ["out:early\n", "sleep:0.1", "out:late\n"], "early", "late"),
    "exec_ordered": ("emit", ["out:a\n", "err:b\n", "out:c\n"], "a\nb\nc\n"),
}

Rewrite = Callable[[Frame], Sequence[Frame]]


class _RewritingFake(Fake):
    """A Fake whose spawned (and, if ``on_attach``, attached) frames pass a rewrite.

    ``rewriter()`` is called once per command and returns that command's
    frame rewrite: a frame in, the frames to deliver out.
    """

    on_spawn = True
    on_attach = False

    def rewriter(self) -> Rewrite:
        raise NotImplementedError

    def _wrap(self, owner: Owner | None) -> Callable[[Frame], None]:
        assert callable(owner), "the conformance suite passes callable owners"
        rewrite = self.rewriter()

        def deliver(frame: Frame) -> None:
            for out in rewrite(frame):
                owner(out)

        return deliver

    def spawn(self, handle: Handle, cmd: str, args: Sequence[str] = (), **opts: Any) -> Command:
        if self.on_spawn:
            opts["owner"] = self._wrap(opts.get("owner"))
        return super().spawn(handle, cmd, args, **opts)

    def attach(self, handle: Handle, session_id: str, **opts: Any) -> Command:
        if self.on_attach:
            opts["owner"] = self._wrap(opts.get("owner"))
        return super().attach(handle, session_id, **opts)


class ExitZeroOnDrop(_RewritingFake):
    """Synthesises ``Exit(0)`` when the transport drops."""

    def rewriter(self) -> Rewrite:
        return lambda frame: [Exit(frame.ref, 0) if isinstance(frame, Error) else frame]


class DoubleTerminal(_RewritingFake):
    """Delivers every terminal frame twice."""

    def rewriter(self) -> Rewrite:
        return lambda frame: [frame, frame] if frame.terminal else [frame]


class LosesAChunk(_RewritingFake):
    """Drops the second stdout chunk of every command."""

    def rewriter(self) -> Rewrite:
        seen = 0

        def rewrite(frame: Frame) -> Sequence[Frame]:
            nonlocal seen
            if isinstance(frame, Stdout):
                seen += 1
                if seen == 2:
                    return []
            return [frame]

        return rewrite


class ReplayStartsLate(_RewritingFake):
    """Attach skips the first replayed stdout chunk (replay not from byte zero)."""

    on_spawn = False
    on_attach = True

    def rewriter(self) -> Rewrite:
        skipped = False

        def rewrite(frame: Frame) -> Sequence[Frame]:
            nonlocal skipped
            if isinstance(frame, Stdout) and not skipped:
                skipped = True
                return []
            return [frame]

        return rewrite


class ReplayForgetsTheExitCode(_RewritingFake):
    """Attach to a finished session replays ``Exit(0)`` instead of the real code."""

    on_spawn = False
    on_attach = True

    def rewriter(self) -> Rewrite:
        return lambda frame: [Exit(frame.ref, 0) if isinstance(frame, Exit) else frame]


class ExitOvertakesHeldOutput(_RewritingFake):
    """Holds stdout until a block of :data:`HELD_BLOCK` bytes is full, and lets a terminal
    frame overtake what it holds (delivered right after it): an adapter that reads
    output and the exit on separate channels without draining the output first."""

    def rewriter(self) -> Rewrite:
        held: list[Frame] = []

        def rewrite(frame: Frame) -> Sequence[Frame]:
            if frame.terminal:
                out = [frame, *held]
            elif isinstance(frame, Stdout):
                held.append(frame)
                if sum(len(f.data) for f in held if isinstance(f, Stdout)) < HELD_BLOCK:
                    return []
                out = list(held)
            else:
                return [frame]
            held.clear()
            return out

        return rewrite


class StopEndsTheSession(Fake):
    """``stop_command`` detaches, then also kills the detachable session it detached from."""

    def stop_command(self, command: Command) -> None:
        super().stop_command(command)
        session = command.private.session
        if self._kill(session):
            self._conclude(session, ("exit", 137))


class MissingIsUnavailable(Fake):
    """Answers ``get`` on a missing sandbox with a transient error."""

    def get(self, handle: Handle) -> Any:
        try:
            return super().get(handle)
        except NotFound:
            raise Unavailable("flaky") from None


class StopIsANoOp(Fake):
    """``stop_command`` does nothing: the command stays connected."""

    def stop_command(self, command: Command) -> None:
        return None


class MislabelledExecTimeout(Fake):
    """An exec deadline surfaces with the wrong detail."""

    def exec(self, handle: Handle, cmd: str, args: Sequence[str] = (), **opts: Any) -> ExecResult:
        try:
            return super().exec(handle, cmd, args, **opts)
        except Unavailable:
            raise Unavailable("timeout") from None


class ExpiresAsPlainUnavailable(Fake):
    """An expired exec deadline is a plain ``Unavailable`` with the right detail: not a
    ``DeadlineExpired``, so ``except TimeoutError`` misses it."""

    def exec(self, handle: Handle, cmd: str, args: Sequence[str] = (), **opts: Any) -> ExecResult:
        try:
            return super().exec(handle, cmd, args, **opts)
        except DeadlineExpired as error:
            raise Unavailable(error.detail) from None


class NegativeTimeoutExpires(Fake):
    """A negative or NaN exec timeout is taken as no time left (an expired deadline)
    instead of being refused as ``Invalid``."""

    def exec(self, handle: Handle, cmd: str, args: Sequence[str] = (), **opts: Any) -> ExecResult:
        timeout = opts.get("timeout")
        if timeout is not None and not timeout > 0:
            raise DeadlineExpired((reasons.EXEC_TIMEOUT, timeout))
        return super().exec(handle, cmd, args, **opts)


class AlwaysMergesStderr(Fake):
    """exec merges stderr even when not asked to."""

    def exec(self, handle: Handle, cmd: str, args: Sequence[str] = (), **opts: Any) -> ExecResult:
        return super().exec(handle, cmd, args, **{**opts, "stderr_to_stdout": True})


class IgnoresMaxBytes(Fake):
    """exec holds any amount of output, whatever its ``max_bytes``."""

    def exec(self, handle: Handle, cmd: str, args: Sequence[str] = (), **opts: Any) -> ExecResult:
        return super().exec(handle, cmd, args, **{**opts, "max_bytes": None})


class StopsReadingAtTheMainExit(Fake):
    """exec collects only what comes before the first pause: output written after the
    main process exits (by a background child) is lost."""

    def exec(self, handle: Handle, cmd: str, args: Sequence[str] = (), **opts: Any) -> ExecResult:
        script = list(args)
        pauses = [n for n, step in enumerate(script) if step.startswith("sleep:")]
        return super().exec(handle, cmd, script[: pauses[0]] if pauses else script, **opts)


class SignalDeathIsMinusOne(_RewritingFake):
    """Reports a command a signal killed as exit code -1 (as envd's own end event does)
    instead of 128 + the signal's number, in exec's result and in a spawn's Exit."""

    @staticmethod
    def _as_envd(code: int) -> int:
        return -1 if code > 128 else code

    def rewriter(self) -> Rewrite:
        return lambda frame: [
            Exit(frame.ref, self._as_envd(frame.code)) if isinstance(frame, Exit) else frame
        ]

    def exec(self, handle: Handle, cmd: str, args: Sequence[str] = (), **opts: Any) -> ExecResult:
        result = super().exec(handle, cmd, args, **opts)
        return ExecResult(result.output, self._as_envd(result.exit_code), result.stderr)


class DirRefusedInItsOwnWords(Fake):
    """A missing ``dir`` is refused as the provider words it, an HTTP 400, not as
    ``Invalid(("dir", ...))``."""

    @staticmethod
    def _reworded(error: Invalid) -> Invalid:
        if reasons.reason_of(error) is not reasons.DIR:
            return error
        return Invalid(reasons.Reason.HTTP, status=400, body={"message": "no such dir"})

    def exec(self, handle: Handle, cmd: str, args: Sequence[str] = (), **opts: Any) -> ExecResult:
        try:
            return super().exec(handle, cmd, args, **opts)
        except Invalid as error:
            raise self._reworded(error) from None

    def spawn(self, handle: Handle, cmd: str, args: Sequence[str] = (), **opts: Any) -> Command:
        try:
            return super().spawn(handle, cmd, args, **opts)
        except Invalid as error:
            raise self._reworded(error) from None


class MergesByArrival(Fake):
    """A merged exec gives all of stdout, then all of stderr: the streams are merged as
    they arrive, not in the order written."""

    def exec(self, handle: Handle, cmd: str, args: Sequence[str] = (), **opts: Any) -> ExecResult:
        if not opts.get("stderr_to_stdout"):
            return super().exec(handle, cmd, args, **opts)
        apart = super().exec(handle, cmd, args, **{**opts, "stderr_to_stdout": False})
        return ExecResult(apart.output + apart.stderr, apart.exit_code)


class NoUrlWhileAdvertised(Fake):
    """Advertises ``public_url`` but answers ``None``."""

    def public_url(self, handle: Handle) -> str | None:
        return None


class UnknownCapability(Fake):
    """Advertises a capability outside the known set."""

    def capabilities(self) -> frozenset[str]:
        return super().capabilities() | {"teleport"}


class CreateNewAdopts(Fake):
    """``create_new`` adopts an existing sandbox (under a fresh-looking instance id)."""

    def create_new(self, name: str, *, timeout: float = 120.0, **opts: Any) -> Handle:
        return attrs.evolve(self.create(name), instance_id=f"adopted-{id(object())}")


class PretendsToCheckpoint(Fake):
    """Checkpoints without advertising ``checkpoint``."""

    def create_checkpoint(self, handle: Handle, *, comment: str | None = None) -> str:
        return "cp-1"


class AbsentIsNotFound(Fake):
    """The old rule: terminating a session that never existed is ``NotFound``."""

    def terminate_session(
        self, handle: Handle, session_id: str, *, timeout: float = 10.0, mode: str = "graceful"
    ) -> None:
        if session_id.startswith("nosuchsession"):
            raise NotFound(("session", session_id))
        super().terminate_session(handle, session_id, timeout=timeout, mode=mode)


class ForceTrustsAbsence(Fake):
    """Force mode takes an absent session as confirmed: success, not unconfirmed."""

    def terminate_session(
        self, handle: Handle, session_id: str, *, timeout: float = 10.0, mode: str = "graceful"
    ) -> None:
        super().terminate_session(handle, session_id, timeout=timeout, mode="graceful")


class StdinErrorsInProse(Fake):
    """``CommandExited`` carries a sentence instead of its reason."""

    def write_stdin(self, command: Command, data: bytes) -> None:
        try:
            super().write_stdin(command, data)
        except CommandExited:
            raise CommandExited("the process has exited") from None

    def close_stdin(self, command: Command) -> None:
        try:
            super().close_stdin(command)
        except CommandExited:
            raise CommandExited("the session had ended before attach") from None


class GuessesHowSessionsEnded(Fake):
    """``list_sessions`` reports every session ended with exit code 0: a guess, not what
    the Fake knows."""

    def list_sessions(self, handle: Handle) -> list[Session]:
        return [
            attrs.evolve(session, ended=True, exit_code=0)
            for session in super().list_sessions(handle)
        ]


class ForgetsWhereItsHandlesLive(Fake):
    """Acts on the world configured now, not the one a handle was made in: a handle used
    after its configuration changed reaches another world (``destroy`` of it reports
    success there while the sandbox runs on)."""

    def _world(self, handle: Handle | None = None) -> Any:
        return super()._world(None)


def _swallowing(owner: Owner | None) -> Callable[[Frame], None]:
    assert callable(owner), "the conformance suite passes callable owners"

    def deliver(frame: Frame) -> None:
        try:
            owner(frame)
        except Exception:
            logging.getLogger("mutant").debug("owner failed", exc_info=True)

    return deliver


def _stopping(owner: Owner | None) -> Callable[[Frame], None]:
    assert callable(owner), "the conformance suite passes callable owners"
    failed = False

    def deliver(frame: Frame) -> None:
        nonlocal failed
        if failed:
            return
        try:
            owner(frame)
        except Exception:
            failed = True
            raise

    return deliver


class SwallowsCallbackErrors(Fake):
    """Catches what an owner callback raises and logs it to a logger nobody configured:
    delivery goes on, but the failure is never seen."""

    def spawn(self, handle: Handle, cmd: str, args: Sequence[str] = (), **opts: Any) -> Command:
        return super().spawn(handle, cmd, args, **{**opts, "owner": _swallowing(opts["owner"])})


class StopsAfterACallbackError(Fake):
    """Reports an owner callback's exception but delivers nothing after it: the command
    never reaches its terminal frame."""

    def spawn(self, handle: Handle, cmd: str, args: Sequence[str] = (), **opts: Any) -> Command:
        return super().spawn(handle, cmd, args, **{**opts, "owner": _stopping(opts["owner"])})


class ExpiryIsUnconfirmed(Fake):
    """The old local and Fake answer: a termination that ran out of time is
    ``Unavailable("termination_unconfirmed")``, not ``DeadlineExpired``."""

    def terminate_session(
        self, handle: Handle, session_id: str, *, timeout: float = 10.0, mode: str = "graceful"
    ) -> None:
        try:
            super().terminate_session(handle, session_id, timeout=timeout, mode=mode)
        except DeadlineExpired:
            raise Unavailable(reasons.TERMINATION_UNCONFIRMED) from None


class UploadLosesModes(Fake):
    """An upload stores every file with mode 0o644, whatever the local one was."""

    def upload(self, handle: Handle, local_path: str, remote_path: str, **opts: Any) -> Any:
        done = super().upload(handle, local_path, remote_path, **opts)
        with self._lock:
            modes = self._sandbox(handle).modes
            for path in modes:
                modes[path] = 0o644
        return done


class UploadFollowsLinks(Fake):
    """An upload stores what a link points at (a dangling one not at all), not the link."""

    def upload(self, handle: Handle, local_path: str, remote_path: str, **opts: Any) -> Any:
        done = super().upload(handle, local_path, remote_path, **opts)
        with self._lock:
            sandbox = self._sandbox(handle)
            for path in list(sandbox.links):
                target = posixpath.normpath(
                    posixpath.join(posixpath.dirname(path), sandbox.links.pop(path))
                )
                if target in sandbox.files:
                    sandbox.files[path] = sandbox.files[target]
        return done


class UploadReplacesTheDirectory(Fake):
    """An upload first removes whatever was at the remote path: no merge."""

    def upload(self, handle: Handle, local_path: str, remote_path: str, **opts: Any) -> Any:
        with self._lock:
            sandbox = self._sandbox(handle)
            for table in (sandbox.files, sandbox.modes, sandbox.dirs, sandbox.links):
                for path in [p for p in table if p.startswith(remote_path + "/")]:
                    del table[path]
        return super().upload(handle, local_path, remote_path, **opts)


class DownloadOfNothingIsEmpty(Fake):
    """A download of a missing path makes an empty directory instead of NotFound."""

    def download(self, handle: Handle, remote_path: str, local_path: str, **opts: Any) -> Any:
        try:
            return super().download(handle, remote_path, local_path, **opts)
        except NotFound:
            os.makedirs(local_path, exist_ok=True)
            return TransferProgress(0, 0, 0, 0)


MUTANTS: list[tuple[type[Fake], str]] = [
    (ExitZeroOnDrop, "test_stream_closed_without_exit_is_an_error_frame_never_an_exit"),
    (ExitZeroOnDrop, "test_error_frame_carries_a_taxonomy_error"),
    (DoubleTerminal, "test_frames_carry_the_ref_and_output_precedes_exactly_one_terminal_frame"),
    (LosesAChunk, "test_large_output_arrives_complete_then_one_exit"),
    (ReplayStartsLate, "test_attach_replays_from_byte_zero_then_tails"),
    (ReplayForgetsTheExitCode, "test_attach_to_finished_session_replays_output_and_real_exit"),
    (MissingIsUnavailable, "test_get_on_missing_sandbox_is_exactly_not_found"),
    (StopIsANoOp, "test_stop_command_is_idempotent_and_silences_the_local_end"),
    (StopEndsTheSession, "test_stop_command_leaves_a_detachable_session_running"),
    (ExitOvertakesHeldOutput, "test_output_written_right_before_exit_arrives_before_the_exit"),
    (
        ExitOvertakesHeldOutput,
        "test_frames_carry_the_ref_and_output_precedes_exactly_one_terminal_frame",
    ),
    (MislabelledExecTimeout, "test_exec_deadline_is_one_bound_that_output_never_extends"),
    (
        ExpiresAsPlainUnavailable,
        "test_an_expired_exec_deadline_is_deadline_expired_and_a_timeout_error",
    ),
    (NegativeTimeoutExpires, "test_a_negative_or_nan_exec_timeout_is_invalid_before_anything_runs"),
    (AlwaysMergesStderr, "test_exec_merges_stderr_only_when_asked"),
    (IgnoresMaxBytes, "test_exec_output_past_max_bytes_is_truncated"),
    (StopsReadingAtTheMainExit, "test_output_of_a_background_child_comes_before_the_end"),
    (MergesByArrival, "test_merged_output_keeps_the_order_the_command_wrote"),
    (SignalDeathIsMinusOne, "test_a_command_killed_by_a_signal_ends_with_128_plus_its_number"),
    (DirRefusedInItsOwnWords, "test_exec_in_a_missing_dir_is_invalid_and_the_sandbox_runs_on"),
    (DirRefusedInItsOwnWords, "test_spawn_in_a_missing_dir_is_invalid_and_the_sandbox_runs_on"),
    (NoUrlWhileAdvertised, "test_public_url_agrees_with_the_advertised_capability"),
    (UnknownCapability, "test_capabilities_are_a_frozenset_of_known_names"),
    (CreateNewAdopts, "test_create_new_refuses_adoption_and_mints_a_new_incarnation_after_destroy"),
    (PretendsToCheckpoint, "test_unadvertised_checkpointing_raises_not_supported"),
    (GuessesHowSessionsEnded, "test_list_sessions_says_how_a_session_ended_and_never_guesses"),
    (AbsentIsNotFound, "test_terminate_session_of_an_ended_or_absent_session_is_one_answer"),
    (ForceTrustsAbsence, "test_terminate_session_of_an_ended_or_absent_session_is_one_answer"),
    (StdinErrorsInProse, "test_write_stdin_after_exit_is_command_exited"),
    (StdinErrorsInProse, "test_stop_command_is_idempotent_and_silences_the_local_end"),
    (StdinErrorsInProse, "test_attach_to_finished_session_replays_output_and_real_exit"),
    (
        ForgetsWhereItsHandlesLive,
        "test_a_handle_acts_on_its_own_sandbox_whatever_the_configuration_is_now",
    ),
    (ExpiryIsUnconfirmed, "test_a_termination_the_session_outlasts_is_deadline_expired"),
    (UploadLosesModes, "test_a_tree_makes_the_round_trip_exactly"),
    (UploadLosesModes, "test_a_single_file_makes_the_round_trip_with_its_mode"),
    (UploadFollowsLinks, "test_a_tree_makes_the_round_trip_exactly"),
    (UploadReplacesTheDirectory, "test_an_upload_merges_into_a_directory_and_replaces_its_files"),
    (DownloadOfNothingIsEmpty, "test_a_download_of_a_missing_path_is_not_found_and_writes_nothing"),
    (
        SwallowsCallbackErrors,
        "test_an_owner_callback_that_raises_is_reported_and_delivery_goes_on",
    ),
    (
        StopsAfterACallbackError,
        "test_an_owner_callback_that_raises_is_reported_and_delivery_goes_on",
    ),
]


def run_conformance_test(adapter: Fake, test_name: str) -> unittest.TestResult:
    """Run one conformance test against ``adapter`` in a fresh test class."""
    probe = type(
        f"Probe{type(adapter).__name__}",
        (ConformanceTests, unittest.TestCase),
        {
            "adapter": adapter,
            "fixtures": PROBE_FIXTURES,
            "frame_timeout": PROBE_FRAME_TIMEOUT,
            "elsewhere": another_world,
        },
    )
    result = unittest.TestResult()
    unittest.TestSuite([probe(test_name)]).run(result)
    return result


def _outcome(result: unittest.TestResult) -> str:
    problems = [text for _, text in result.failures + result.errors]
    skips = [reason for _, reason in result.skipped]
    return f"run={result.testsRun} problems={problems} skipped={skips}"


@pytest.mark.parametrize(
    ("mutant", "test_name"), MUTANTS, ids=[f"{m.__name__}-{t}" for m, t in MUTANTS]
)
def test_the_suite_fails_an_adapter_that_breaks_the_promise(
    mutant: type[Fake], test_name: str
) -> None:
    control = run_conformance_test(Fake(), test_name)
    assert control.testsRun == 1 and control.wasSuccessful() and not control.skipped, _outcome(
        control
    )

    result = run_conformance_test(mutant(), test_name)
    assert result.testsRun == 1 and not result.skipped, _outcome(result)
    assert len(result.failures) == 1 and not result.errors, _outcome(result)


def test_gated_tests_skip_with_the_missing_capability_named() -> None:
    class Bare(Fake):
        def capabilities(self) -> frozenset[str]:
            return frozenset()

    result = run_conformance_test(Bare(), "test_attach_replays_from_byte_zero_then_tails")
    assert [reason for _, reason in result.skipped] == [
        "the adapter does not advertise the 'attach' capability"
    ]


def test_checkpoint_coherence_is_skipped_when_checkpoint_is_advertised() -> None:
    class Checkpointing(Fake):
        def capabilities(self) -> frozenset[str]:
            return super().capabilities() | {"checkpoint"}

    result = run_conformance_test(
        Checkpointing(), "test_unadvertised_checkpointing_raises_not_supported"
    )
    assert len(result.skipped) == 1 and "'checkpoint'" in result.skipped[0][1]


def test_a_missing_optional_fixture_skips_and_a_missing_required_one_fails() -> None:
    probe = type(
        "ProbeFixtures",
        (ConformanceTests, unittest.TestCase),
        {"adapter": Fake, "fixtures": {}, "frame_timeout": PROBE_FRAME_TIMEOUT},
    )
    result = unittest.TestResult()
    unittest.TestSuite(
        [
            probe("test_large_output_arrives_complete_then_one_exit"),
            probe("test_exec_collects_output_with_zero_exit"),
        ]
    ).run(result)
    assert [reason for _, reason in result.skipped] == [
        "the optional fixture 'spawn_bulk' is not provided"
    ]
    assert len(result.failures) == 1
    assert "the required fixture 'exec_ok' is missing" in result.failures[0][1]


def test_a_misspelt_fixture_name_fails_the_class() -> None:
    fixtures = {**FAKE_FIXTURES, "spawn_drops": ("emit", ["drop"])}
    probe = type(
        "ProbeTypo", (ConformanceTests, unittest.TestCase), {"adapter": Fake, "fixtures": fixtures}
    )
    result = unittest.TestResult()
    unittest.TestSuite([probe("test_build_handle_is_pure_and_provider_tagged")]).run(result)
    assert len(result.errors) == 1 and "spawn_drops" in result.errors[0][1]


#: For each capability the suite gates on: the operations an adapter without it refuses.
REFUSED_WITHOUT: dict[str, tuple[str, ...]] = {
    Capability.SUSPEND: ("suspend", "resume"),
    Capability.ATTACH: ("attach",),
    Capability.NETWORK_POLICY: ("apply_network_policy",),
    Capability.TERMINATE_SESSION: ("terminate_session",),
    Capability.CREATE_NEW: ("create_new",),
    Capability.READ_FILE: ("read_file",),
    Capability.LIST_FILES: ("list_files",),
}


def _lacking(capability: str) -> type[Fake]:
    """A Fake that does not advertise ``capability`` and refuses its operations."""

    def refuse(self: Fake, *args: Any, **kwargs: Any) -> Any:
        raise NotSupported(capability)

    def capabilities(self: Fake) -> frozenset[str]:
        return Fake.capabilities(self) - {capability}

    operations: dict[str, Any] = {op: refuse for op in REFUSED_WITHOUT[capability]}
    return type(f"FakeWithout_{capability}", (Fake,), {**operations, "capabilities": capabilities})


@pytest.mark.parametrize("capability", sorted(REFUSED_WITHOUT))
def test_an_adapter_without_a_capability_passes_with_its_tests_skipped(capability: str) -> None:
    """The whole suite against an adapter that lacks ``capability`` (and says NotSupported
    to its operations): nothing fails, and the tests that need it are skipped, naming it."""
    probe = type(
        f"ProbeWithout_{capability}",
        (ConformanceTests, unittest.TestCase),
        {
            "adapter": _lacking(capability)(),
            "fixtures": FAKE_FIXTURES,
            "frame_timeout": PROBE_FRAME_TIMEOUT,
        },
    )
    result = unittest.TestResult()
    unittest.TestLoader().loadTestsFromTestCase(probe).run(result)
    assert result.wasSuccessful(), _outcome(result)
    reason = f"the adapter does not advertise the {capability!r} capability"
    assert reason in [text for _, text in result.skipped], _outcome(result)


#: The capabilities whose operations the unadvertised-operations test calls.
GATED_OPERATIONS = (
    Capability.SUSPEND,
    Capability.ATTACH,
    Capability.NETWORK_POLICY,
    Capability.TERMINATE_SESSION,
    Capability.CREATE_NEW,
)


@pytest.mark.parametrize("capability", GATED_OPERATIONS)
def test_the_suite_fails_an_adapter_that_serves_an_operation_it_does_not_advertise(
    capability: str,
) -> None:
    """Control: a Fake without ``capability`` whose operations say NotSupported passes.
    Mutant: the same Fake, its operations still working, fails."""
    test_name = "test_operations_behind_an_unadvertised_capability_are_not_supported"
    control = run_conformance_test(_lacking(capability)(), test_name)
    assert control.testsRun == 1 and control.wasSuccessful() and not control.skipped, _outcome(
        control
    )

    def capabilities(self: Fake) -> frozenset[str]:
        return Fake.capabilities(self) - {capability}

    serving = type(f"ServesWithout_{capability}", (Fake,), {"capabilities": capabilities})
    result = run_conformance_test(serving(), test_name)
    assert result.testsRun == 1 and not result.skipped, _outcome(result)
    # One failure per operation behind the capability (each is a subtest).
    failed = len(REFUSED_WITHOUT[capability])
    assert len(result.failures) == failed and not result.errors, _outcome(result)
