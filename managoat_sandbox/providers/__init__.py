"""The adapters shipped with the package, one subpackage per provider.

(Named ``providers`` rather than ``adapters`` so that importing a subpackage
never shadows the facade function ``managoat_sandbox.adapters``.) Adapters
never import each other; each is registered by name in
:mod:`managoat_sandbox.registry` and imported only when first used.
"""
