"""``python -m managoat_sandbox``: the command line of :mod:`managoat_sandbox.cli`."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
