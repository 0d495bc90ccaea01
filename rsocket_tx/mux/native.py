"""What the compiled build (mypyc) reads from the source, and nothing at run time.

``pip install .`` compiles the sans-IO layers with mypyc when it can (``setup.py``,
:mod:`rsocket_tx.build`); the same source runs as pure Python otherwise. A compiled class is
closed to Python subclasses unless marked: :func:`mypyc_attr` marks the classes that
applications or other layers subclass (``allow_interpreted_subclasses=True``).

mypy and mypyc see ``mypy_extensions.mypyc_attr`` (installed with mypy); at run time the
decorator is a no-op defined here, so the package needs no third-party module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["mypyc_attr"]

if TYPE_CHECKING:
    from mypy_extensions import mypyc_attr
else:
    def mypyc_attr(*attrs: Any, **kwattrs: Any) -> Any:
        """``mypy_extensions.mypyc_attr`` at run time: leaves the class as it is."""
        return lambda cls: cls
