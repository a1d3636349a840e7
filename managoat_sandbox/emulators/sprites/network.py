"""A sprite's network policy as its box's egress filter enforces it.

Sprites rules (docs/protocols/sprites.md#network-policy) name a host exactly, by subdomain wildcard
(``*.example.com``) or ``*``, with ``allow`` or ``deny``, or include a preset;
``{"rules": []}`` enforces nothing, and once rules are in force a host no rule
allows is refused. The box's filter (:mod:`managoat_sandbox._engine.egress`)
takes an allow-list with the same host patterns, so the documented forms map
exactly:

* no rules, or ``*`` allowed → no allow-list (any public host);
* allow rules, with or without ``{"domain": "*", "action": "deny"}`` → an
  allow-list of those hosts (``*`` denied alone → nothing is reachable).

Rule sets that are not allow-lists — presets (``include``), whose domain lists
the platform does not publish, and denials of particular hosts — are stored
and reported as given but not enforced (no allow-list). An allow rule whose
domain is not a host name matches no host and is left out. Everything else
the filter does applies to every sprite: no private, loopback or metadata
address, and only through the proxy announced in ``HTTP_PROXY``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..._engine import egress

_STAR = "*"


def egress_policy(rules: Sequence[Mapping[str, Any]]) -> egress.Policy:
    """The egress policy enforcing validated Sprites ``rules`` (see the module docstring)."""
    allowed: list[str] = []
    star: str | None = None
    for rule in rules:
        if rule.get("include") is not None:
            return egress.Policy()
        domain = str(rule.get("domain", "")).strip().lower()
        action = rule.get("action")
        if domain == _STAR:
            if star not in (None, action):
                return egress.Policy()
            star = str(action)
        elif action != "allow":
            return egress.Policy()
        else:
            try:
                allowed.append(egress.check_domain(domain))
            except ValueError:
                continue
    if not rules or star == "allow":
        return egress.Policy()
    return egress.Policy(allow=tuple(dict.fromkeys(allowed)))
