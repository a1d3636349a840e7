"""managoat_sandbox: one blocking, thread-friendly API over agent sandboxes.

Use it through the module::

    import managoat_sandbox as sandbox

    handle = sandbox.create("local", "my-box")
    output, code = sandbox.exec(handle, "bash", ["-lc", "uname -a"])

Creation-side functions take a provider name; everything else dispatches on
the provider tag of the ``Handle`` or ``Command`` it is given. ``__all__``
leaves out ``exec``, which would shadow the builtin on a star import.

The ``managoat_sandbox`` logger has a ``NullHandler``: a program that sets up
no logging hears nothing (not even retry warnings); one that does sees them.
"""

import logging

from ._temporary import temporary
from ._version import __version__
from .contract import KNOWN_CAPABILITIES, Adapter, Capability, IsolationWarning
from .errors import (
    AlreadyExists,
    CommandExited,
    DeadlineExpired,
    Denied,
    Invalid,
    NotFound,
    NotSupported,
    ProviderError,
    RateLimited,
    RestoreFailed,
    SandboxError,
    Truncated,
    Unavailable,
    UnknownProvider,
    WriteFailed,
)
from .facade import (
    adapter_for,
    adapters,
    apply_network_policy,
    attach,
    build_handle,
    capabilities,
    close_stdin,
    create,
    create_checkpoint,
    create_checkpoint_once,
    create_new,
    destroy,
    destroy_once,
    download,
    get,
    host_path,
    list_all_names,
    list_files,
    list_sessions,
    public_url,
    read_file,
    restore_checkpoint,
    resume,
    spawn,
    stop_command,
    supports,
    suspend,
    terminate_session,
    upload,
    write_file,
    write_stdin,
)

# Public, but kept out of __all__ (it would shadow the builtin on a star import); the
# redundant alias marks it exported for type checkers (mypy --strict's no_implicit_reexport).
from .facade import exec as exec
from .frames import Error, Exit, Frame, Stderr, Stdout, iter_frames
from .types import (
    Command,
    ExecResult,
    FileInfo,
    Handle,
    Info,
    NetworkPolicy,
    Session,
    TransferProgress,
)

__all__ = [
    "KNOWN_CAPABILITIES",
    "Adapter",
    "AlreadyExists",
    "Capability",
    "Command",
    "CommandExited",
    "DeadlineExpired",
    "Denied",
    "Error",
    "ExecResult",
    "FileInfo",
    "Exit",
    "Frame",
    "Handle",
    "Info",
    "Invalid",
    "IsolationWarning",
    "NetworkPolicy",
    "NotFound",
    "NotSupported",
    "ProviderError",
    "RateLimited",
    "RestoreFailed",
    "SandboxError",
    "Session",
    "TransferProgress",
    "Stderr",
    "Stdout",
    "Truncated",
    "Unavailable",
    "UnknownProvider",
    "WriteFailed",
    "__version__",
    "adapter_for",
    "adapters",
    "apply_network_policy",
    "attach",
    "build_handle",
    "capabilities",
    "close_stdin",
    "create",
    "create_checkpoint",
    "create_checkpoint_once",
    "create_new",
    "destroy",
    "destroy_once",
    "download",
    "get",
    "host_path",
    "iter_frames",
    "list_all_names",
    "list_files",
    "list_sessions",
    "public_url",
    "read_file",
    "restore_checkpoint",
    "resume",
    "spawn",
    "stop_command",
    "supports",
    "suspend",
    "terminate_session",
    "temporary",
    "upload",
    "write_file",
    "write_stdin",
]

logging.getLogger(__name__).addHandler(logging.NullHandler())
