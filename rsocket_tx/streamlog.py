"""Moved to :mod:`rsocket_tx.apps.streamlog`; this name stays importable.

An alias: the import below puts the new module in ``sys.modules`` under this name too, so
both names are the same module object (``import``, ``from ... import``,
``unittest.mock.patch`` targets and pickles that use the old name keep working).
"""

import sys

from .apps import streamlog as _module

sys.modules[__name__] = _module
