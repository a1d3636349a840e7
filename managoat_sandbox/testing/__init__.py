"""Testing support: the in-memory reference ``Fake`` and the ``ConformanceTests`` mixin."""

from .conformance import ConformanceTests
from .fake import Fake

__all__ = ["ConformanceTests", "Fake"]
