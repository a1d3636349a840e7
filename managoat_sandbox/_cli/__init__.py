"""The command line's parts; :mod:`managoat_sandbox.cli` is its entry point.

``parser`` (argparse: subcommands, help, handlers), ``console`` (the three
standard streams), ``render`` (error lines and ``--json`` documents),
``exits`` (exit statuses), ``sandboxes`` and ``sessions`` (one-shot
commands), ``streaming`` and ``stdin`` (exec, spawn and attach).
"""
