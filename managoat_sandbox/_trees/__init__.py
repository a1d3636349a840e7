"""Whole trees in and out of a sandbox (``upload``/``download``), as one tar stream.

* :mod:`.counter` — the progress a transfer reports;
* :mod:`.pack` — a local file or tree as a tar stream, read as it is written;
* :mod:`.unpack` — a tar stream from a sandbox written under a local path,
  never outside it;
* :mod:`.over_command` — both directions through a ``tar`` run in the sandbox,
  over any adapter's ``spawn``: the stream goes through the command's stdin or
  stdout.
"""
