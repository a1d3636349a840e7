"""Adapters shipped with the package, one subpackage per provider.

Adapters never import each other; each is registered by name in
:mod:`managoat_sandbox.registry` and imported only when first used.
"""
