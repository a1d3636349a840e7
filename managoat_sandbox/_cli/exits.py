"""The command line's exit statuses.

``exec``, ``spawn`` and ``attach`` otherwise exit with the remote command's
own status (see :func:`managoat_sandbox._cli.streaming.exit_status`), which
may itself be 1, 2 or 124: the one-line error on stderr (or the last JSON line
under ``--json``) tells a library failure from a command's own status.
"""

OK = 0
ERROR = 1  #: a library error (a ``SandboxError``): one line on stderr
USAGE = 2  #: bad arguments (argparse) or an unknown provider
TIMEOUT = 124  #: ``exec --timeout`` expired (as ``timeout(1)`` reports it); one line on stderr
INTERRUPTED = 130  #: Ctrl-C (128 + SIGINT)
BROKEN_PIPE = 141  #: stdout was closed under us (128 + SIGPIPE), as a shell reports it
