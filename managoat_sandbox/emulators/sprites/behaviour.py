"""Switches for Sprites' behaviours that vary (docs/protocols/sprites.md#behaviours-that-vary)."""

from __future__ import annotations

import attrs


@attrs.define
class Behaviour:
    """Mutable knobs of one emulator (tests set them directly).

    * ``conflict_status`` — create with an existing name: 409 (observed) or 400
      (the API table's variant);
    * ``page_size`` — the server's cap on ``max_results`` (documented 1-50);
    * ``boot_refusals`` — each sprite created from now on answers its first N
      exec upgrades with 503 ``{"error":"unavailable"}``, as a booting sprite does;
    * ``restore_unknown_status`` — None: restoring an unknown checkpoint is a
      200 stream ending in an ``error`` event (in-band); else that status;
    * ``kill_gone_status`` — kill of an ended session: 404, or 410 (Go SDK);
    * ``list_finished_sessions`` — whether ``GET …/exec`` lists ended sessions;
    * ``attach_finished_status`` — None: attaching to an ended session replays
      it and sends its exit; else that status before the upgrade;
    * ``policy_delay`` — seconds a policy POST to a cold sprite waits (boot time);
    * ``max_output_frame`` — the largest output payload in one WebSocket message;
    * ``string_session_ids`` — ``session_info.session_id`` as a string instead of
      the documented integer (clients must accept both).
    """

    conflict_status: int = 409
    page_size: int = 50
    boot_refusals: int = 0
    restore_unknown_status: int | None = None
    kill_gone_status: int = 404
    list_finished_sessions: bool = False
    attach_finished_status: int | None = None
    policy_delay: float = 0.0
    max_output_frame: int = 32 * 1024
    string_session_ids: bool = False
