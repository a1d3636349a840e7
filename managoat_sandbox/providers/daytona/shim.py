"""The shell text the adapter sends into a sandbox.

Every command (an exec in a kept session, a spawn in a session of its own)
runs through this shim. The daemon *sources* the submitted script in the
session's shell and records as ``exitCode`` the status of the script's last
statement — so a script ending in ``exit N`` would kill the session shell and
no exit code would ever be recorded
(docs/protocols/daytona.md#exit-in-a-sourced-script). So the caller's
command never runs in the session shell: a spawn's whole script is a single
``/bin/sh -c '<shim>'``, which may ``exit`` freely, its status being the last
statement's; an exec's script runs its command in a subshell ``( … )`` and
ends with ``return <code>`` (:func:`exec_script`). Either way the daemon
records the command's real exit code and the session shell stays usable for
the next command.

The daemon journals output per complete line (a partial line appears only
at EOF, with a newline added), and JSON answers turn invalid UTF-8 into
U+FFFD. So that output reaches the caller as it is written — a prompt
without a newline, ``cat`` echoing stdin — and byte-exact, the shim *frames*
each stream itself: an encoder reads whatever bytes the command wrote (one
``dd`` read, at most 64 KiB, never waiting for a newline) and emits them as
one journal line ``:<base64>``. The read that meets the end of the stream
emits the empty frame ``:``, which ends it. After both encoders have ended
(the command and every child holding its output have closed it), the shim
writes ``!<code>`` on stdout: the journal then holds everything, and says so.
:mod:`.decoder` decodes it; any other line (an error of the shim itself)
passes through as text.

The shim keeps a small state directory ``${TMPDIR:-/tmp}/managoat/<session>``
(one per session: a session runs one command at a time):

* ``code`` — the exit code, written atomically after the command ends (the
  sentinel a follower probes for when a log stops growing);
* ``pid`` — the shim's process id, so that a follower can tell a command that
  is still running from one whose shim died without recording anything (the
  session shell was killed): that command is gone, its exit unknowable;
* ``o.dd``/``e.dd`` — what the encoders' last ``dd`` reported;
* with stdin, ``in`` — a FIFO the command reads, fed by a *relay* whose pid is
  in ``relay``. The relay reads the daemon's stdin (which the daemon holds open
  for async commands) line by line, each line being base64 of the bytes to
  deliver, so the daemon's "append a newline" rule cannot alter the data. An
  empty line makes the relay exit: that closes the FIFO's only writer and the
  command reads a real EOF. The relay's stdout/stderr never point at the
  daemon's output pipes, so it cannot delay the recorded exit code.

The caller's command runs in a process group (and session) of its own,
through ``setsid`` where the sandbox has it (util-linux and busybox do), as
a local command does: a signal it sends its own group (``kill 0``, a
script's ``trap 'kill 0' EXIT``) reaches it and its children, never the
shim, its encoders or the session shell, so what it wrote and its exit code
(128 + N for a signal) are kept and the session stays usable. Deleting the
session still reaches it: the daemon kills the shell's group and every
descendant that left it. Without ``setsid`` the command shares the session
shell's group, and such a signal ends the session too.

A command without stdin reads ``/dev/null``. The script starts with a no-op
``: managoat-argv=<base64 JSON>`` so ``list_sessions`` can report the
command line the caller asked for.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import secrets
import shlex
from collections.abc import Mapping, Sequence

import attrs

from ..._own_group import own_group
from ...errors import Invalid
from ...reasons import Reason
from .decoder import NO_DIR

__all__ = [
    "COMMAND_LIMIT",
    "Program",
    "close_line",
    "command_line_of",
    "echoed_size",
    "enter_script",
    "exec_script",
    "input_lines",
    "is_spawn_script",
    "kill_relay",
    "parse_probe",
    "probe",
    "program",
    "script",
]

_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Around a command's line: the script's own stderr goes to /dev/null (kept on fd 4, which
#: the command does not get), so that the shell's report of a command a signal killed
#: (``Killed``, ``Terminated``) never joins the command's stderr in the daemon's journal.
_QUIET = "exec 4>&2 2>/dev/null"
_LOUD = "exec 2>&4 4>&-"
_ARGV_MARK = re.compile(r"^: managoat-argv=([A-Za-z0-9+/=]+);")
#: Raw bytes per base64 line sent to the relay (64 KiB of base64).
_INPUT_CHUNK = 48 * 1024


def state_dir(session_id: str) -> str:
    """The shim's state directory, as shell text (expanded inside the sandbox)."""
    return '"${TMPDIR:-/tmp}/managoat/"' + shlex.quote(session_id)


@attrs.frozen
class Program:
    """What a command runs: the caller's argv, its working directory (``None``: the
    session's), and ``body``, the shell text that sets its env and runs it there."""

    argv: tuple[str, ...]
    cwd: str | None
    body: str = attrs.field(repr=False)

    @property
    def text(self) -> str:
        """The command in a child shell that first enters ``cwd``."""
        steps = [] if self.cwd is None else ["cd " + shlex.quote(self.cwd)]
        return "( " + " && ".join([*steps, self.body]) + " )"

    def entered(self) -> Program:
        """This command run from where its shell already is: the caller has entered
        ``cwd`` beforehand (:func:`enter_script`)."""
        return attrs.evolve(self, cwd=None)


def enter_script(cwd: str) -> str:
    """The session script that makes ``cwd`` its shell's working directory. It prints
    nothing, and the status the daemon records is nonzero when the shell cannot enter
    ``cwd`` (missing, not a directory, not searchable)."""
    return f"cd {shlex.quote(cwd)} >/dev/null 2>&1"


#: The most bytes the text of a command (argv, env and dir, quoted for the shell) may
#: take in the daemon's JSON records, which echo it (see :data:`.toolbox.RECORD_LIMIT`).
COMMAND_LIMIT = 256 * 1024


def program(
    cmd: str, args: Sequence[str], *, env: Mapping[str, str] | None, cwd: str | None
) -> Program:
    """The command ``cmd args`` in ``cwd`` with ``env`` added, in a process group of its
    own where the sandbox has ``setsid`` (the scripts of this module say whether it
    has, before they run it; see the module docstring). Raised here, before
    anything is sent: an env name the shell cannot export is ``Invalid``, and so is a
    NUL in the command, an env value or ``cwd`` (no process can be given one, and the
    shell would drop it silently), and a command whose text is over
    :data:`COMMAND_LIMIT` (``"command_too_large"``)."""
    if any("\0" in part for part in (cmd, *args)):
        raise Invalid(Reason.ARGS, problem="no argument may contain NUL")
    if cwd is not None and "\0" in cwd:
        raise Invalid(Reason.DIR, problem="dir must not contain NUL")
    steps: list[str] = []
    for key, value in (env or {}).items():
        if _ENV_KEY.fullmatch(key) is None:
            raise Invalid(Reason.ENV, problem=f"{key!r} is not a valid environment variable name")
        if "\0" in value:
            raise Invalid(Reason.ENV, problem=f"the value of {key!r} contains NUL")
        steps.append(f"export {key}={shlex.quote(value)}")
    argv = " ".join(shlex.quote(part) for part in (cmd, *args))
    if cmd.startswith("-"):
        # setsid would read it as its own option: it keeps the session shell's group.
        steps.append(f"exec {argv}")
    else:
        steps += [own_group(shlex.quote(cmd), "__mg_own"), f"exec ${{__mg_own}} {argv}"]
    run = Program((cmd, *args), cwd, " && ".join(steps))
    size = echoed_size(run.text)
    if size > COMMAND_LIMIT:
        raise Invalid(
            Reason.COMMAND_TOO_LARGE,
            problem=f"the command's argv, env and dir come to {size} bytes as the daemon "
            f"records them; Daytona commands are limited to {COMMAND_LIMIT} bytes",
        )
    return run


def echoed_size(text: str) -> int:
    """An upper bound of the bytes ``text`` takes in the daemon's JSON (Go escapes ``<``,
    ``>`` and ``&`` as ``\\u00XX``; every other escape is at most Python's ASCII one)."""
    escaped = sum(text.count(c) for c in "<>&")
    return len(json.dumps(text)) + 5 * escaped


#: The perl the encoders use when the sandbox has one (perl 5, core only: base64 is
#: uuencoding, ``pack("u")``, put in base64's alphabet and padding).
PERL = "perl"
_PERL_ENCODER = (
    "binmode STDIN; binmode STDOUT; while (1) { my $n = sysread(STDIN, my $b, 65536); "
    'exit 1 if !defined $n; my $u = pack("u", $b); $u =~ s/^.//mg; $u =~ tr/\\n//d; '
    "$u =~ tr/`!-_/A-Za-z0-9+\\//; my $p = (3 - $n % 3) % 3; "
    'substr($u, -$p) = "=" x $p if $p; my $f = ":$u\\n"; '
    'while (length $f) { my $w = syswrite(STDOUT, $f); exit 1 if !$w; substr($f, 0, $w) = ""; } '
    "last if !$n; }"
)


def _encoder(status: str) -> str:
    """The frame encoder of one stream; ``status`` names the file its fallback's dd
    reports its reads in.

    Each read takes whatever bytes are there (at most 64 KiB, never waiting for
    more) and prints them as one frame line ``:<base64>``; the read that meets
    the end of the stream prints the end frame ``:``. With perl it is one
    process; the portable fallback runs ``dd | base64 | tr`` per read (a dd
    failure ends it too).
    """
    portable = (
        "while :; do printf ':'; "
        f"LC_ALL=C dd bs=65536 count=1 2>\"$d/{status}\" | base64 | tr -d '\\n'; echo; "
        f'read -r s <"$d/{status}" || break; '
        "case $s in 0+0*) break;; [0-9]*) ;; *) break;; esac; done"
    )
    return (
        f"if command -v {PERL} >/dev/null 2>&1; then {PERL} -e "
        f"{shlex.quote(_PERL_ENCODER)}; else {portable}; fi"
    )


_RELAY = (
    '( while IFS= read -r l; do [ -n "$l" ] || break; '
    "printf '%s' \"$l\" | base64 -d || break; done )"
)


def script(session_id: str, run: Program, *, stdin: bool) -> str:
    """The session script that runs ``run`` in session ``session_id`` (see the module
    docstring): it ends with the command's real exit status."""
    command = run.text
    fifos = '"$d/o" "$d/e" "$d/in"' if stdin else '"$d/o" "$d/e"'
    lines = [
        "d=" + state_dir(session_id),
        # A new session's directory is new: only one reused (or the first of the
        # sandbox, whose parent is missing) needs the slower way that clears it.
        'mkdir "$d" 2>/dev/null || { mkdir -p "$d" && rm -f "$d/code" "$d/o" "$d/e" "$d/in"; } '
        "|| exit 125",
        f'echo "$$" >"$d/pid" && mkfifo {fifos} || exit 125',
        f'{_encoder("o.dd")} <"$d/o" &',
        "o=$!",
        f'{_encoder("e.dd")} <"$d/e" >&2 &',
        "e=$!",
    ]
    if stdin:
        lines += [
            "exec 3<&0",
            f'{_RELAY} <&3 3<&- >"$d/in" 2>/dev/null &',
            "r=$!",
            'echo "$r" >"$d/relay"',
            _QUIET,
            f'{command} <"$d/in" >"$d/o" 2>"$d/e" 3<&- 4>&-',
            "c=$?",
            _LOUD,
            'kill "$r" 2>/dev/null',
        ]
    else:
        lines += [_QUIET, f'{command} </dev/null >"$d/o" 2>"$d/e" 4>&-', "c=$?", _LOUD]
    lines += [
        'wait "$o" "$e"',
        "printf '!%s\\n' \"$c\"",
        'printf \'%s\\n\' "$c" >"$d/code.tmp" && mv -f "$d/code.tmp" "$d/code"',
        'exit "$c"',
    ]
    argv = base64.b64encode(json.dumps(list(run.argv)).encode("utf-8")).decode("ascii")
    return f": managoat-argv={argv}; /bin/sh -c {shlex.quote(chr(10).join(lines))}"


def _whole_frame(path: str) -> str:
    """Shell text printing the file at ``path`` as one frame line (none if it is empty),
    then the end frame."""
    return (
        f"{{ if [ -s \"{path}\" ]; then printf ':'; base64 \"{path}\" | tr -d '\\n'; "
        "echo; fi; echo ':'; }"
    )


#: An exec session's capture files that stayed empty are removed by every this many
#: execs in it (:func:`exec_script`'s ``sweep``).
SWEEP_EVERY = 32


def _copier(fifo: str, path: str) -> list[str]:
    """Session-script lines copying the session's FIFO ``fifo`` into the file at
    ``path`` in the background, adding the copy's pid to ``$__mg_w``."""
    return [
        f'cat "$__mg_d/{fifo}" >"{path}" </dev/null 2>/dev/null &',
        '__mg_w="$__mg_w $!"',
    ]


def exec_script(session_id: str, run: Program, *, merge: bool, sweep: bool = False) -> str:
    """The script of a synchronous exec of ``run`` in the kept session ``session_id``.

    The daemon answers a synchronous exec only once the command has ended, so
    nothing needs to stream: the command's stdout and stderr (one file when
    ``merge``: both, in the order written) are captured in files of the state
    directory, then framed whole, one line per stream, followed by the end
    frames and the exit code, as :func:`script` frames them.

    The command writes into FIFOs of the session (made once, ``po``/``pe``),
    each copied into its capture file by a ``cat`` in the background: the
    script waits for those copies, which end when every writer has closed the
    FIFO — the command and any child that still holds its output. So what a
    background child writes after the main process exits is part of the
    answer, and the exec ends only at end of file (a child that keeps the
    output open keeps the exec running until its deadline, which deletes the
    session and so kills it).

    The script runs in the session shell itself, which the daemon *sources* it
    in: no shell is started for it, and it ends with ``return <code>``, which
    sets the status the daemon records without ending the session shell. The
    command runs in a child shell, so nothing it does (``cd``, ``export``,
    ``exit``) reaches the session; the script's own variables are prefixed
    ``__mg_``. ``pid`` is the session shell's.

    The child shell enters the command's working directory itself: when it
    cannot, it writes the line :data:`.decoder.NO_DIR` on the session's
    stdout (before any frame) and the command never starts.

    The capture files are named for this exec alone, so a process an earlier
    exec left running in the session writes to files no later exec reads.
    Files that hold output are removed at once, in the background and detached
    from the daemon's output pipes, so the answer does not wait for ``rm``;
    files that stayed empty (nothing to free but their names) are left for a
    ``sweep``, which removes every capture file of the session and which the
    caller asks for every :data:`SWEEP_EVERY` execs: an exec without output
    starts no process besides its command.
    """
    nonce = secrets.token_hex(6)
    err = "2>&1" if merge else '2>"$__mg_d/pe"'
    enter = (
        []
        if run.cwd is None
        else [
            f"cd {shlex.quote(run.cwd)} 2>/dev/null || "
            f"{{ printf '%s\\n' '{NO_DIR.decode()}' >&3; exit 125; }}",
            "exec 3>&-",
        ]
    )
    remove = (
        'rm -f "$__mg_d"/o.* "$__mg_d"/e.* </dev/null >/dev/null 2>&1 &'
        if sweep
        else 'if [ -s "$__mg_o" ] || [ -s "$__mg_e" ]; then '
        'rm -f "$__mg_o" "$__mg_e" </dev/null >/dev/null 2>&1 & fi'
    )
    lines = [
        "__mg_d=" + state_dir(session_id),
        '{ [ -d "$__mg_d" ] || mkdir -p "$__mg_d"; } && : >"$__mg_d/code" && '
        'echo "$$" >"$__mg_d/pid" || return 125',
        f'__mg_o="$__mg_d/o.{nonce}"; __mg_e="$__mg_d/e.{nonce}"',
        '{ [ -p "$__mg_d/po" ] && [ -p "$__mg_d/pe" ]; } || '
        '{ rm -f "$__mg_d/po" "$__mg_d/pe"; mkfifo "$__mg_d/po" "$__mg_d/pe"; } || return 125',
        '__mg_w=""',
        *_copier("po", "$__mg_o"),
        *([] if merge else _copier("pe", "$__mg_e")),
        _QUIET,
        f"( {'; '.join([*enter, run.body])} ){' 3>&1' if enter else ''} "
        f'</dev/null >"$__mg_d/po" {err} 4>&-',
        "__mg_c=$?",
        _LOUD,
        "wait $__mg_w",
        _whole_frame("$__mg_o"),
        _whole_frame("$__mg_e") + " >&2",
        remove,
        'printf \'!%s\\n\' "$__mg_c"; printf \'%s\\n\' "$__mg_c" >"$__mg_d/code"',
        'return "$__mg_c"',
    ]
    return "\n".join(lines)


def is_spawn_script(text: object) -> bool:
    """Whether ``text`` is a spawn's script (:func:`script`), by its argv mark."""
    return isinstance(text, str) and _ARGV_MARK.match(text) is not None


def command_line_of(text: object) -> str | None:
    """The caller's command line (cmd and args joined by spaces) recorded in a script."""
    if not isinstance(text, str):
        return None
    found = _ARGV_MARK.match(text)
    if found is None:
        return text
    try:
        argv = json.loads(base64.b64decode(found.group(1), validate=True))
    except (ValueError, binascii.Error):
        return text
    if not isinstance(argv, list) or not all(isinstance(part, str) for part in argv):
        return text
    return " ".join(argv)


def input_lines(data: bytes) -> str:
    """``data`` as the relay's input: base64 lines, newline-terminated (empty for no data)."""
    return "".join(
        base64.b64encode(data[start : start + _INPUT_CHUNK]).decode("ascii") + "\n"
        for start in range(0, len(data), _INPUT_CHUNK)
    )


def close_line() -> str:
    """The relay's end-of-input line: after it, the command reads EOF."""
    return "\n"


#: What :func:`probe` prints, besides an exit code.
RUNNING = "running"
GONE = "gone"


def probe(session_id: str) -> str:
    """Housekeeping command printing the recorded exit code; else ``running`` while the
    shim lives (or has not started), ``gone`` once it died without recording one (a
    zombie nobody reaped yet counts as dead)."""
    d = state_dir(session_id)
    alive = (
        f'{{ p=$(cat {d}/pid); kill -0 "$p" 2>/dev/null && '
        f"! grep -qs '^State:[[:space:]]*Z' \"/proc/$p/status\"; }}"
    )
    return (
        f"if [ -s {d}/code ]; then cat {d}/code; "
        f"elif [ ! -s {d}/pid ] || {alive}; then echo {RUNNING}; "
        f"elif [ -s {d}/code ]; then cat {d}/code; "
        f"else echo {GONE}; fi"
    )


def kill_relay(session_id: str) -> str:
    """Housekeeping command killing the stdin relay, closing the command's stdin."""
    return f'kill "$(cat {state_dir(session_id)}/relay 2>/dev/null)" 2>/dev/null; true'


def parse_probe(output: bytes) -> int | str | None:
    """A :func:`probe` answer: the exit code, :data:`RUNNING`, :data:`GONE`, or ``None``."""
    text = output.strip().decode("ascii", "replace")
    if text in (RUNNING, GONE):
        return text
    if text.lstrip("-").isdigit():
        return int(text)
    return None


def chmod(path: str, mode: int) -> str:
    """Housekeeping command setting a file's permission bits."""
    return f"chmod {mode:o} {shlex.quote(path)}"
