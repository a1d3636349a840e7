"""Testing support: the in-memory reference ``Fake`` and the ``ConformanceTests`` mixin."""

from .fake import Fake

__all__ = ["Fake"]
