"""The process engine behind ``local`` and the emulators: one agent per sandbox.

Standard library only and importing nothing outside itself, because the
agent (:mod:`.agent`) and the keeper (:mod:`.keeper`) run this package as a
top-level one, with ``python -I -S``, from inside (or beside) the sandbox.
Import its modules directly; this file imports nothing so that starting the
agent costs only what the agent uses.

* :mod:`.box`, :mod:`.client`, :mod:`.transport` — a sandbox's directory and
  the library's client of its agent;
* :mod:`.launch`, :mod:`.isolation`, :mod:`.mounts` — starting
  the agent under bubblewrap (or not), and what the sandbox sees;
* :mod:`.agent` and its ``agent_*`` modules, :mod:`.stdin_feed`, :mod:`.process_tree`,
  :mod:`.retention` — the agent;
* :mod:`.keeper_start`, :mod:`.keeper`, :mod:`.egress` — the host-side proxy and its policy;
* :mod:`.wire`, :mod:`.events`, :mod:`.subscription`, :mod:`.records` — the
  protocol, and reading what the agent streams and records;
* :mod:`.safefs` — the sandbox's files, reached from the host safely;
* :mod:`.settings`, :mod:`.limits` — what a box is.
"""
