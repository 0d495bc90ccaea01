"""Moved to :mod:`rsocket_tx.faces.main` (the ``rsocket-tx`` command; RSocket's own commands are
:mod:`rsocket_tx.faces.cli`); this name stays importable.

An alias: the import below puts the new module in ``sys.modules`` under this name too, so
both names are the same module object (``import``, ``from ... import``,
``unittest.mock.patch`` targets and pickles that use the old name keep working).

``python -m rsocket_tx.cli`` runs this file as ``__main__``: it runs the command line
(:func:`rsocket_tx.faces.main.main`) instead.
"""

import sys

from .faces import main as _module

if __name__ == "__main__":
    _module.main()
else:
    sys.modules[__name__] = _module
