"""The E2B emulator: a local control plane and envd, driven by real processes.

``E2BEmulator`` serves E2B's REST API and, routed by the ``E2b-Sandbox-Id``
and ``E2b-Sandbox-Port`` headers, envd's Connect (JSON) process service and
file API on one 127.0.0.1 port, faithfully enough that the official ``e2b``
SDK works against it unchanged::

    with E2BEmulator(credential="e2b_test") as emulator:
        os.environ.update(E2B_API_KEY="e2b_test", E2B_API_URL=emulator.base_url,
                          E2B_SANDBOX_URL=emulator.base_url)

From a shell: ``python -m managoat_sandbox.emulators e2b --port 3000``. Shell
users reach the test controls over HTTP, with the API key (``X-API-Key``, or
``Authorization: Bearer``): the base's ``POST /_emulator/faults``
takes every fault kind named in :mod:`.envd` and :mod:`.control` (for example
``{"kind": "stream_no_end", "path": "/process\\.Process/Start$", "size": 1}``),
and ``POST /_emulator/e2b/clock`` / ``POST /_emulator/e2b/expire/{id}`` drive
the TTL clock. Hosts ``<port>-<id>.<domain>`` are served only for the
``domain`` the emulator was given (docs/emulators.md).

Each sandbox is one process-engine box: its commands run inside it (in
their own namespaces where the host allows) and every path the emulator
handles is the sandbox's own.

Modules: :mod:`.connect` (envelope codec), :mod:`.state` (records, clock,
listings), :mod:`.world` (lifecycle), :mod:`.layout` (a sandbox's box, its
users and files), :mod:`.processes` (envd's process table), :mod:`.streams`
(server streams and their faults), :mod:`.control` and :mod:`.envd` (the two
HTTP surfaces).
"""

from .. import require_extra

require_extra()

from .emulator import E2BEmulator  # noqa: E402 - only once the extra is known to be there

__all__ = ["E2BEmulator"]
