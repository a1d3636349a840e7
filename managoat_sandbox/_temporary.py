"""``temporary``: a fresh sandbox for one block, destroyed when the block ends.

``create`` adopts by name and nothing it returns is ever destroyed
implicitly; ``temporary`` is its throwaway counterpart, as
``tempfile.TemporaryDirectory`` is to ``os.mkdir``::

    with sandbox.temporary("local", prefix="ci-job") as handle:
        sandbox.exec(handle, "make", ["test"])
    # destroyed here, also after an exception or Ctrl-C

The name is ``<prefix>-<12 random hex digits>``. The sandbox is made with
``create_new`` where the adapter advertises it (one attempt, never adopting);
elsewhere the name is first checked to be free (``get`` says ``NotFound``) and
then created, so an existing sandbox is never adopted — and so never
destroyed — unless one of that random name appears between the two calls.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Iterator
from typing import Any

from . import _args
from .contract import Capability
from .errors import AlreadyExists, NotFound
from .facade import build_handle, create, create_new, destroy, get, supports
from .reasons import Reason
from .types import Handle

__all__ = ["temporary"]

log = logging.getLogger("managoat_sandbox")

#: Random hex digits after the prefix (48 bits: a clash is vanishingly unlikely).
SUFFIX_DIGITS = 12


def temporary_name(prefix: str) -> str:
    """``<prefix>-<random hex>``, checked as a sandbox name (``Invalid`` if the prefix
    makes an unusable one; not a str: ``TypeError``)."""
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str, got {type(prefix).__name__}")
    name: str = _args.normalised(name=f"{prefix}-{secrets.token_hex(SUFFIX_DIGITS // 2)}")["name"]
    return name


def _fresh(provider: str, name: str, timeout: float, opts: dict[str, Any]) -> Handle:
    """A sandbox made under ``name``, never an existing one adopted."""
    if supports(provider, Capability.CREATE_NEW):
        return create_new(provider, name, timeout=timeout, **opts)
    try:
        get(build_handle(provider, name))
    except NotFound:
        return create(provider, name, **opts)
    raise AlreadyExists(Reason.SANDBOX, name=name)


@contextlib.contextmanager
def temporary(
    provider: str, prefix: str = "tmp", *, timeout: float = 120.0, **opts: Any
) -> Iterator[Handle]:
    """A new sandbox at ``provider`` named ``<prefix>-<random hex>``, destroyed when the
    block ends — normally, by an exception, or by ``KeyboardInterrupt``.

    ``opts`` are the provider's creation options, as for ``create``; ``timeout``
    bounds ``create_new`` where it is used (see the module docstring). Creation
    failing raises its error and leaves nothing to destroy. When the block raised,
    a failure to destroy is logged and noted on the block's exception, which
    propagates; when it did not, that failure is raised.
    """
    name = temporary_name(prefix)
    handle = _fresh(provider, name, timeout, opts)
    try:
        yield handle
    except BaseException as error:
        try:
            destroy(handle)
        except Exception as failure:
            log.warning("could not destroy the temporary sandbox %r: %r", name, failure)
            note = getattr(error, "add_note", None)  # Python >= 3.11
            if note is not None:
                note(f"the temporary sandbox {name!r} may still exist: {failure!r}")
        raise
    destroy(handle)
