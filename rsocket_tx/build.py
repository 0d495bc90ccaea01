"""Which build of rsocket_tx runs: compiled with mypyc, or pure Python.

``pip install .`` (and ``pip install -e .``, ``make venv``) compiles the modules of
:data:`COMPILED_MODULES` with `mypyc <https://mypyc.readthedocs.io/>`_ from the same typed
source when mypyc (shipped with mypy, a build requirement) and a C compiler are available;
otherwise, or with ``RSOCKET_TX_PURE=1`` in the environment of the install, the package is
pure Python. Both behave the same (``tests/test_compiled.py`` compares them); the compiled
one costs less CPU per message (:doc:`benchmarks`).

:data:`compiled` says which build this interpreter imported; ``rsocket-tx --version`` prints
it (:func:`describe`).
"""

from __future__ import annotations

import importlib
import importlib.machinery
from types import ModuleType

__all__ = ["COMPILED_MODULES", "compiled", "compiled_modules", "describe", "is_compiled"]

#: The modules ``setup.py`` compiles with mypyc (read there from this file's source): the
#: sans-IO layers (the mux layer, the RSocket core, the codecs and connections of the Jini ERI
#: mux, the RS-network draft and the 2015 ReactiveSocket draft). What stays Python in both
#: builds: the ``errors`` modules (exception classes, subclassed by applications, some with two
#: bases), :class:`~rsocket_tx.mux.outbox.Outbox` (a ``list`` subclass), the id policy protocol
#: (runtime-checkable), and the modules of the values applications build and the checks of
#: their arguments (``core.config``, ``core.lease``, ``core.resume``, ``core.frames``,
#: ``core.sniff``): compiled, a wrong type would raise mypyc's ``TypeError``
#: at the call instead of the documented ``ValueError``, ``True`` would pass as an integer, and
#: the frames' ``frame_type`` class constants do not build.
COMPILED_MODULES: tuple[str, ...] = (
    "rsocket_tx.mux.credit",
    "rsocket_tx.mux.deadlines",
    "rsocket_tx.mux.ids",
    "rsocket_tx.mux.reassembly",
    "rsocket_tx.mux.sniff",
    "rsocket_tx.mux.streams",
    "rsocket_tx.core.connection",
    "rsocket_tx.core.events",
    "rsocket_tx.core.fragmentation",
    "rsocket_tx.core.framing",
    "rsocket_tx.core.payload",
)


def is_compiled(module: ModuleType) -> bool:
    """Whether ``module`` was loaded from an extension module (a compiled build), not from
    Python source."""
    location = getattr(module, "__file__", None) or ""
    return location.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def compiled_modules() -> list[str]:
    """The modules of :data:`COMPILED_MODULES` that run compiled in this interpreter
    (imports each of them): all of them in the compiled build, none in the pure one."""
    return [name for name in COMPILED_MODULES if is_compiled(importlib.import_module(name))]


def _probe() -> bool:
    from .mux import streams

    return is_compiled(streams)


#: ``True`` when this interpreter runs the compiled build (mypyc), ``False`` for pure Python.
compiled: bool = _probe()


def describe() -> str:
    """``"compiled: mypyc"`` or ``"pure Python"``: the build, as ``rsocket-tx --version``
    prints it."""
    return "compiled: mypyc" if compiled else "pure Python"
