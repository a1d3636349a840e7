"""The reasons the library puts in errors, named once: :class:`Reason`.

Every error the library raises names its reason from :class:`Reason` and gives
what that reason carries as keyword fields
(``Invalid(Reason.PATH, problem="must not be empty")``,
``NotFound(Reason.SANDBOX, name=name)``); the error keeps them as attributes
(``error.reason``, ``error.name``…) and builds its ``detail`` — the tuple
callers have always matched on — from them in the order :func:`shape` gives:
the reason's value alone when it carries nothing, else
``(value, field, ...)`` (``("path", "must not be empty")``). A field the shape
marks optional is left out of the tuple when it is ``None``.

Code that decides by reason compares ``error.reason`` (or :func:`reason_of`,
which also reads a bare detail) with a member here instead of indexing
details or repeating a string. The module-level constants are the same
members under their old names.
"""

from __future__ import annotations

import enum
from typing import Any

__all__ = [
    "CLOSED_BEFORE_EXIT",
    "COMMAND_TOO_LARGE",
    "DETACHED",
    "DIR",
    "EXEC_TIMEOUT",
    "EXITED",
    "FIELDS",
    "FRAME_TIMEOUT",
    "HTTP",
    "MAX_BYTES",
    "PATH",
    "REFUSED",
    "RESPONSE_TOO_LARGE",
    "SANDBOX_NOT_RUNNING",
    "STDIN_NOT_OPEN",
    "TERMINATION_REQUEST",
    "TERMINATION_TIMEOUT",
    "TERMINATION_TRANSPORT_FAILED",
    "TERMINATION_UNCONFIRMED",
    "TIMEOUT",
    "TRANSFER",
    "TRANSPORT",
    "Reason",
    "no_such_dir",
    "reason_of",
    "shape",
    "timed_out",
    "transport_failed",
    "unconfirmed",
]

#: Every context field an error can carry, in the one order a detail lists them:
#: ``status`` and ``body`` of an HTTP answer; ``kind`` of a transport failure (an
#: exception class name) and the ``address`` (``host:port``) it failed to reach;
#: ``seconds`` of a deadline; ``limit`` of a bound and ``count`` of what passed it;
#: the ``name`` of a sandbox, session, checkpoint or archive entry and its ``state``;
#: the ``scope`` and ``key`` of a setting; a ``path`` in the sandbox; a ``code``
#: (an exit status, a refusal's code); ``answer``, the type name of a provider
#: answer of the wrong shape; ``problem``, words saying what is wrong.
FIELDS = (
    "status",
    "body",
    "kind",
    "address",
    "seconds",
    "limit",
    "count",
    "scope",
    "key",
    "name",
    "state",
    "code",
    "path",
    "answer",
    "problem",
)


class Reason(str, enum.Enum):
    """Why an error was raised: the first element of its ``detail`` (or the detail).

    A ``str`` whose value is the detail's string, so ``Reason.HTTP == "http"``;
    ``str()`` and formatting give the value.
    """

    def __str__(self) -> str:
        return self.value

    # Outcomes of commands and streams.
    #: A stream ended without the command's exit: never a guessed code.
    CLOSED_BEFORE_EXIT = "closed_before_exit"
    #: ``exec``'s deadline passed (``seconds``: its timeout).
    EXEC_TIMEOUT = "exec_timeout"
    #: ``iter_frames``'s wait for the next frame passed (``seconds``).
    FRAME_TIMEOUT = "frame_timeout"
    #: A request or stream waited past its own bound; of an ``Invalid``, a bad
    #: ``timeout`` argument (``problem``).
    TIMEOUT = "timeout"
    #: A stdin call on a command that has ended.
    EXITED = "exited"
    #: A stdin call on a command whose local end was stopped.
    DETACHED = "detached"
    #: A stdin write refused by the provider or local agent (``code``).
    REFUSED = "refused"
    #: A stdin call on a command started without stdin, or after EOF.
    STDIN_NOT_OPEN = "stdin_not_open"
    #: The thread reading a command's stream failed (``kind``).
    READER_FAILED = "reader_failed"

    # The wire.
    #: The connection failed (``kind``, ``address``).
    TRANSPORT = "transport"
    #: A non-2xx HTTP answer (``status``, ``body``).
    HTTP = "http"
    #: An answer larger than the client reads (``limit``).
    RESPONSE_TOO_LARGE = "response_too_large"
    #: A body that should be JSON is not (``status``).
    MALFORMED_JSON = "malformed_json"
    #: A multipart answer that does not parse (``problem``).
    MALFORMED_MULTIPART = "malformed_multipart"

    # Bounds and listings.
    #: More than ``max_bytes`` (``limit``); of an ``Invalid``, a bad ``max_bytes`` (``problem``).
    MAX_BYTES = "max_bytes"
    #: A listing reached its page cap (``limit``), or a bad cap (``limit``).
    MAX_PAGES = "max_pages"
    #: A provider's listing reached the adapter's page cap (``limit``).
    PAGE_CAP = "page_cap"
    #: A listing walked by ``_paging.walk`` reached its page cap (``limit``; E2B, Daytona).
    PAGES = "pages"
    #: A page said there is more without saying where (``count``: its items).
    HAS_MORE_WITHOUT_TOKEN = "has_more_without_token"
    #: A file (or session) listing larger than the adapter reads (``limit``).
    LISTING_BYTES = "listing_bytes"

    # What is named.
    #: A sandbox (``name``, and its ``state`` when that is why).
    SANDBOX = "sandbox"
    #: A session (``name``: its id).
    SESSION = "session"
    #: A session the provider lists without its command (``name``).
    SESSION_WITHOUT_COMMAND = "session_without_command"
    #: A file call's path: ``path`` (of a ``NotFound``/``Denied``) or ``problem``
    #: (of an ``Invalid``: what is wrong, or the refusal's code).
    PATH = "path"
    #: A listed path that is not a directory (``path``).
    NOT_A_DIRECTORY = "not_a_directory"
    #: ``exec``/``spawn``'s ``dir`` (``problem``; see :func:`no_such_dir`).
    DIR = "dir"
    #: A checkpoint restore asked for a checkpoint that is not there (``name``).
    NO_SUCH_CHECKPOINT = "no_such_checkpoint"
    #: An archive entry ``upload``/``download`` refuses (``name``).
    ARCHIVE_ENTRY = "archive_entry"
    #: A handle used where it does not belong (``problem``: ``"endpoint_changed"``).
    HANDLE = "handle"
    #: A setting a rule refuses or that is unset (``scope``, ``key``).
    CONFIG = "config"
    #: No credential configured (``scope``, ``key``).
    NO_CREDENTIAL = "no_credential"

    # Arguments (``problem`` says what is wrong with the one named).
    ARGS = "args"
    CAPABILITY = "capability"
    CHECKPOINT_ID = "checkpoint_id"
    CHECKPOINT_OPERATION_ID = "checkpoint_operation_id"
    CMD = "cmd"
    COMMENT = "comment"
    CREATE_OPTIONS = "create_options"
    DATA = "data"
    DETACHABLE = "detachable"
    ENV = "env"
    LIMITS = "limits"
    LOCAL_PATH = "local_path"
    MODE = "mode"
    NAME = "name"
    OWNER = "owner"
    POLICY = "policy"
    ROOT = "root"
    SESSION_ID = "session_id"
    SPRITE_NAME = "sprite_name"
    STDERR_TO_STDOUT = "stderr_to_stdout"
    STDIN = "stdin"
    # ... of ``with_backoff`` (retry), and of adapters' constructors.
    ATTEMPTS = "attempts"
    BASE = "base"
    HEARTBEAT_INTERVAL = "heartbeat_interval"
    HEARTBEAT_LINGER = "heartbeat_linger"
    IDLE_TIMEOUT = "idle_timeout"
    KEEPALIVE = "keepalive"
    MAX_DELAY = "max_delay"
    MAX_RETRY_AFTER = "max_retry_after"
    #: A malformed ``terminate_session`` request (the words are the error's message).
    TERMINATION_REQUEST = "termination_request"
    #: A command too large for the provider to record (Daytona; ``problem``).
    COMMAND_TOO_LARGE = "command_too_large"
    #: A Fake script instruction it does not know (``problem``).
    FAKE_INSTRUCTION = "fake_instruction"

    # Operations and capabilities (what a ``NotSupported`` names; ``network_policy``
    # and ``transfer`` also of an ``Invalid``, with a ``problem``).
    ATTACH = "attach"
    CHECKPOINT = "checkpoint"
    CREATE_CHECKPOINT_ONCE = "create_checkpoint_once"
    CREATE_NEW = "create_new"
    DESTROY_ONCE = "destroy_once"
    FORCE_TERMINATE_SESSION = "force_terminate_session"
    LIST_FILES = "list_files"
    NETWORK_POLICY = "network_policy"
    PUBLIC_URL = "public_url"
    READ_FILE = "read_file"
    SUSPEND = "suspend"
    TERMINATE_SESSION = "terminate_session"
    TRANSFER = "transfer"
    TTY = "tty"

    # Bounded operations' outcomes (:func:`timed_out`, :func:`transport_failed`,
    # :func:`unconfirmed`).
    CHECKPOINT_TIMEOUT = "checkpoint_timeout"
    CHECKPOINT_TRANSPORT_FAILED = "checkpoint_transport_failed"
    CHECKPOINT_UNCONFIRMED = "checkpoint_unconfirmed"
    CREATE_TIMEOUT = "create_timeout"
    CREATE_TRANSPORT_FAILED = "create_transport_failed"
    CREATE_UNCONFIRMED = "create_unconfirmed"
    DELETE_TIMEOUT = "delete_timeout"
    DELETE_TRANSPORT_FAILED = "delete_transport_failed"
    DELETE_UNCONFIRMED = "delete_unconfirmed"
    DESTROY_UNCONFIRMED = "destroy_unconfirmed"
    RESTORE_UNCONFIRMED = "restore_unconfirmed"
    START_TIMEOUT = "start_timeout"
    TERMINATION_TIMEOUT = "termination_timeout"
    TERMINATION_TRANSPORT_FAILED = "termination_transport_failed"
    TERMINATION_UNCONFIRMED = "termination_unconfirmed"
    TRANSFER_TIMEOUT = "transfer_timeout"

    # Failures in the sandbox or its provider (``problem`` says what it said).
    AGENT_FAILED = "agent_failed"
    AGENT_NOT_RUNNING = "agent_not_running"
    #: The local agent refused a request (``code``).
    AGENT_REFUSED = "agent_refused"
    CHECKPOINT_FAILED = "checkpoint_failed"
    #: A chmod in the sandbox failed (``code``, ``path``, ``problem``: as much as known).
    CHMOD_FAILED = "chmod_failed"
    CREATE_FAILED = "create_failed"
    ISOLATION_UNAVAILABLE = "isolation_unavailable"
    JOURNAL_FAILED = "journal_failed"
    #: A file operation failed (``path``, ``problem``).
    LIST_FAILED = "list_failed"
    POLICY_FAILED = "policy_failed"
    READ_FAILED = "read_failed"
    RESTORE_FAILED = "restore_failed"
    #: The provider refused because the sandbox is not running (Daytona; ``state``).
    SANDBOX_NOT_RUNNING = "sandbox_not_running"
    #: A sandbox that did not start (``state``).
    SANDBOX_NOT_STARTED = "sandbox_not_started"
    #: A sandbox in a state the adapter cannot use (``state``).
    SANDBOX_STATE = "sandbox_state"
    #: Listing sessions in the sandbox failed (``code``).
    SESSION_LISTING_FAILED = "session_listing_failed"
    WRITE_FAILED = "write_failed"

    # Provider answers of the wrong shape (a ``ProviderError``; ``answer`` is the
    # type name of what came, ``problem``/``name``/``path`` what was missing).
    BAD_ENVELOPE = "bad_envelope"
    BAD_LISTING = "bad_listing"
    BAD_SANDBOX_ID = "bad_sandbox_id"
    MALFORMED_EXIT = "malformed_exit"
    MALFORMED_FILE_LISTING = "malformed_file_listing"
    MALFORMED_LISTING = "malformed_listing"
    MALFORMED_PROGRESS_STREAM = "malformed_progress_stream"
    NO_CHECKPOINT_ID = "no_checkpoint_id"
    NO_COMMAND_ID = "no_command_id"
    NO_EXIT_CODE = "no_exit_code"
    NO_FILE_PART = "no_file_part"
    NO_SANDBOX_ID = "no_sandbox_id"
    NO_TOOLBOX_PROXY_URL = "no_toolbox_proxy_url"
    NOT_A_COMMAND = "not_a_command"
    NOT_A_FILE_INFO = "not_a_file_info"
    NOT_A_LISTING = "not_a_listing"
    NOT_A_SANDBOX = "not_a_sandbox"
    NOT_A_SESSION = "not_a_session"
    NOT_A_SESSION_LIST = "not_a_session_list"
    NOT_AN_EXEC_RESULT = "not_an_exec_result"
    NOT_AN_EXECUTE_RESULT = "not_an_execute_result"
    UNEXPECTED_CHECKPOINTS = "unexpected_checkpoints"
    UNEXPECTED_SPRITE = "unexpected_sprite"


#: What each reason carries, in detail order; a name ending in ``?`` is left out of
#: the detail when it is ``None``. A reason not listed carries ``problem?``.
_SHAPES: dict[Reason, tuple[str, ...]] = {
    Reason.CLOSED_BEFORE_EXIT: (),
    Reason.EXEC_TIMEOUT: ("seconds",),
    Reason.FRAME_TIMEOUT: ("seconds",),
    Reason.EXITED: (),
    Reason.DETACHED: (),
    Reason.REFUSED: ("code",),
    Reason.STDIN_NOT_OPEN: (),
    Reason.READER_FAILED: ("kind",),
    Reason.TRANSPORT: ("kind", "address?"),
    Reason.HTTP: ("status", "body"),
    Reason.RESPONSE_TOO_LARGE: ("limit",),
    Reason.MALFORMED_JSON: ("status",),
    Reason.MAX_BYTES: ("limit?", "problem?"),
    Reason.MAX_PAGES: ("limit",),
    Reason.PAGE_CAP: ("limit",),
    Reason.PAGES: ("limit",),
    Reason.HAS_MORE_WITHOUT_TOKEN: ("count",),
    Reason.LISTING_BYTES: ("limit",),
    Reason.SANDBOX: ("name", "state?"),
    Reason.SESSION: ("name",),
    Reason.SESSION_WITHOUT_COMMAND: ("name",),
    Reason.PATH: ("path?", "problem?"),
    Reason.NOT_A_DIRECTORY: ("path",),
    Reason.NO_SUCH_CHECKPOINT: ("name",),
    Reason.ARCHIVE_ENTRY: ("name",),
    Reason.CONFIG: ("scope", "key"),
    Reason.NO_CREDENTIAL: ("scope", "key"),
    Reason.TERMINATION_REQUEST: (),
    Reason.AGENT_NOT_RUNNING: (),
    Reason.AGENT_REFUSED: ("code",),
    Reason.CHMOD_FAILED: ("code?", "path?", "problem?"),
    Reason.LIST_FAILED: ("path", "problem"),
    Reason.READ_FAILED: ("path", "problem"),
    Reason.WRITE_FAILED: ("path", "problem"),
    Reason.SANDBOX_NOT_RUNNING: ("state",),
    Reason.SANDBOX_NOT_STARTED: ("state",),
    Reason.SANDBOX_STATE: ("state",),
    Reason.SESSION_LISTING_FAILED: ("code",),
    Reason.MALFORMED_EXIT: ("name",),
    Reason.NO_FILE_PART: ("path",),
    Reason.NO_EXIT_CODE: ("answer?", "problem?"),
    **{
        reason: ("answer",)
        for reason in (
            Reason.BAD_SANDBOX_ID,
            Reason.MALFORMED_LISTING,
            Reason.NO_COMMAND_ID,
            Reason.NO_SANDBOX_ID,
            Reason.NO_TOOLBOX_PROXY_URL,
            Reason.NOT_A_COMMAND,
            Reason.NOT_A_FILE_INFO,
            Reason.NOT_A_LISTING,
            Reason.NOT_A_SANDBOX,
            Reason.NOT_A_SESSION,
            Reason.NOT_A_SESSION_LIST,
            Reason.NOT_AN_EXEC_RESULT,
            Reason.NOT_AN_EXECUTE_RESULT,
            Reason.UNEXPECTED_CHECKPOINTS,
            Reason.UNEXPECTED_SPRITE,
        )
    },
}

_DEFAULT_SHAPE = ("problem?",)


def shape(reason: Reason) -> tuple[str, ...]:
    """The fields ``reason`` carries, in detail order (``?``: left out when ``None``)."""
    return _SHAPES.get(reason, _DEFAULT_SHAPE)


CLOSED_BEFORE_EXIT = Reason.CLOSED_BEFORE_EXIT
EXEC_TIMEOUT = Reason.EXEC_TIMEOUT
FRAME_TIMEOUT = Reason.FRAME_TIMEOUT
TIMEOUT = Reason.TIMEOUT
TRANSPORT = Reason.TRANSPORT
HTTP = Reason.HTTP
RESPONSE_TOO_LARGE = Reason.RESPONSE_TOO_LARGE
MAX_BYTES = Reason.MAX_BYTES
EXITED = Reason.EXITED
DETACHED = Reason.DETACHED
REFUSED = Reason.REFUSED
STDIN_NOT_OPEN = Reason.STDIN_NOT_OPEN
TRANSFER = Reason.TRANSFER
TERMINATION_REQUEST = Reason.TERMINATION_REQUEST
TERMINATION_UNCONFIRMED = Reason.TERMINATION_UNCONFIRMED
TERMINATION_TIMEOUT = Reason.TERMINATION_TIMEOUT
TERMINATION_TRANSPORT_FAILED = Reason.TERMINATION_TRANSPORT_FAILED
SANDBOX_NOT_RUNNING = Reason.SANDBOX_NOT_RUNNING
COMMAND_TOO_LARGE = Reason.COMMAND_TOO_LARGE
DIR = Reason.DIR
PATH = Reason.PATH


def timed_out(operation: str) -> Reason:
    """A bounded operation's deadline passed: ``Reason("<operation>_timeout")``."""
    return Reason(f"{operation}_timeout")


def transport_failed(operation: str) -> Reason:
    """A bounded operation could not reach the provider."""
    return Reason(f"{operation}_transport_failed")


def unconfirmed(operation: str) -> Reason:
    """A bounded operation's outcome could not be confirmed."""
    return Reason(f"{operation}_unconfirmed")


def no_such_dir(dir: str) -> str:
    """The ``problem`` of the ``Invalid(Reason.DIR)`` an ``exec`` or ``spawn`` in ``dir``
    raises when ``dir`` is not a directory in the sandbox."""
    return f"{dir!r} is not a directory in the sandbox"


def reason_of(value: Any) -> Reason | str | None:
    """The reason of an error or of a detail: an error's ``reason`` when it has one,
    else the detail itself when it is a str, its first element when it is a tuple
    starting with a str, else ``None`` (a member of :class:`Reason` when the string
    is one)."""
    reason = getattr(value, "reason", None)
    if isinstance(reason, Reason):
        return reason
    detail = getattr(value, "detail", value)
    if isinstance(detail, tuple) and detail and isinstance(detail[0], str):
        detail = detail[0]
    if not isinstance(detail, str):
        return None
    try:
        return Reason(detail)
    except ValueError:
        return detail
