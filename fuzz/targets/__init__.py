"""One fuzz target per module: ``PROTOCOL`` (the protocol's name in reports), ``KIND``
(``"codec"``: bytes to one codec; ``"conversation"``: a whole conversation with a sans-IO
connection, API calls interleaved; reports sum them apart),
``INSTRUMENT`` (the packages whose coverage guides the fuzzer) and
``one_input(data: bytes) -> None``.

:func:`names` lists them; :func:`load` imports one.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from types import ModuleType

__all__ = ["KINDS", "names", "load", "source", "instrumented", "kind"]

KINDS = ("codec", "conversation")

HERE = Path(__file__).resolve().parent


def names() -> list[str]:
    """Every target, by module name, sorted."""
    return sorted(p.stem for p in HERE.glob("*.py") if p.stem != "__init__")


def source(name: str) -> Path:
    """The file of target ``name``.

    :raises ValueError: no such target.
    """
    if name not in names():
        raise ValueError(f"no fuzz target {name!r}; the targets are {', '.join(names())}")
    return HERE / f"{name}.py"


def instrumented(path: Path) -> tuple[str, ...]:
    """The ``INSTRUMENT`` tuple of the target in ``path``, read without importing it (the
    instrumentation must be in place before the protocol modules are imported)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "INSTRUMENT" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    return ("rsocket_tx",)


def load(name: str) -> ModuleType:
    """Import target ``name``.

    :raises ValueError: no such target.
    """
    source(name)
    return importlib.import_module(f"{__name__}.{name}")


def kind(name: str) -> str:
    """The ``KIND`` of target ``name``: one of :data:`KINDS`.

    :raises ValueError: no such target, or it declares no known ``KIND``.
    """
    declared = getattr(load(name), "KIND", None)
    if declared not in KINDS:
        raise ValueError(f"fuzz target {name!r} declares KIND={declared!r}; "
                         f"one of {', '.join(KINDS)} is needed")
    return declared
