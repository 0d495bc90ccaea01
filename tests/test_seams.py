"""No module of rsocket_tx reaches into another module's underscore names.

The seams between modules are documented interfaces (:mod:`rsocket_tx.interfaces`), public
attributes and methods: a name with a leading underscore belongs to the module that defines it
(DESIGN.md §2, "Seams are interfaces, not private reaches"). The rule, checked on the source
of every module of the package (third-party underscore names count too):

* ``obj._name`` where ``obj`` is not ``self``/``cls`` and ``_name`` (not a dunder) is not
  defined in the same module (as a function, class, module or class variable, ``self._name``
  / ``cls._name`` assignment, or ``__slots__`` entry) is an offence: it is another module's
  private name (a module may use its own across its classes and instances);
* ``from m import _name`` is an offence;
* ``getattr``/``setattr``/``hasattr``/``delattr`` with a literal ``"_name"`` the module does
  not define is an offence (the same reach, spelled as a string).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "rsocket_tx"
_REFLECTION = {"getattr", "setattr", "hasattr", "delattr"}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _is_self(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def _own_names(tree: ast.Module) -> set[str]:
    """The underscore names a module defines."""
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)  # module, class and local variables
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                and _is_self(node.value):
            own.add(node.attr)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__slots__" for t in targets) \
                    and isinstance(node.value, (ast.Tuple, ast.List)):
                own.update(e.value for e in node.value.elts
                           if isinstance(e, ast.Constant) and isinstance(e.value, str))
    return {name for name in own if _private(name)}


def offences(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """The reaches into other modules' underscore names in the module at ``path``, as
    ``"file:line: what"`` strings, ``file`` relative to ``root``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    own = _own_names(tree)
    where = path.relative_to(root).as_posix()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) \
                and not _is_self(node.value) and node.attr not in own:
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{where}:{node.lineno}: from {'.' * node.level}"
                                 f"{node.module or ''} import {alias.name}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in _REFLECTION and len(node.args) >= 2 \
                and not _is_self(node.args[0]) and isinstance(node.args[1], ast.Constant) \
                and isinstance(node.args[1].value, str) and _private(node.args[1].value) \
                and node.args[1].value not in own:
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return found


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_no_module_uses_another_modules_underscore_names() -> None:
    found = [offence for path in _modules() for offence in offences(path)]
    assert not found, ("modules reach into other modules' underscore names (use a public "
                       "name or an interface of rsocket_tx.interfaces):\n  " + "\n  ".join(found))


@pytest.mark.parametrize("source, expected", [
    ("def f(p):\n    return p._conn\n", ["m.py:2: p._conn"]),
    ("from .x import _hidden\n", ["m.py:1: from .x import _hidden"]),
    ("def f(p):\n    return getattr(p, '_hook', None)\n",
     ["m.py:2: getattr(p, '_hook', None)"]),
    ("class A:\n    def __init__(self):\n        self._n = 1\n    def same(self, other):\n"
     "        return other._n + self._n\n", []),  # the module's own name
    ("class A:\n    __slots__ = ('_n',)\n\ndef f(a):\n    return a._n\n", []),
    ("def f(p):\n    return p.__class__, p.public\n", []),
])
def test_the_rule(tmp_path: Path, source: str, expected: list[str]) -> None:
    """The checker flags what it should, and only that."""
    module = tmp_path / "m.py"
    module.write_text(source)
    assert offences(module, tmp_path) == expected


def test_library_factory_does_not_depend_on_the_demo() -> None:
    """The demo responder is the faces' default (twistd, the CLI), not the library's: a
    server factory without a responder factory serves the base Responder and does not import
    the demo."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from rsocket_tx.protocol import RSocketServerFactory\n"
            "from rsocket_tx.responder import Responder\n"
            "factory = RSocketServerFactory(None)\n"
            "assert factory.responder_factory is Responder, factory.responder_factory\n"
            "assert 'rsocket_tx.apps.demo' not in sys.modules\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr


def test_the_rsocket_objects_provide_the_documented_interfaces() -> None:
    """The seams of the Twisted side are rsocket_tx.interfaces: what each object provides is
    verified against its interface (methods, their arguments, attributes)."""
    from twisted_support import EchoResponder, server_protocol
    from zope.interface.verify import verifyClass, verifyObject

    from rsocket_tx.client import make_setup
    from rsocket_tx.interfaces import (
        IConnectionObserver,
        ILeaseHost,
        IRequesterHost,
        IStreamHost,
        IStreamReceiver,
    )
    from rsocket_tx.protocol import RSocketClientFactory
    from rsocket_tx.streams import RequestStream

    proto, _, _ = server_protocol(EchoResponder)
    for interface in (IStreamHost, ILeaseHost, IRequesterHost):
        assert verifyObject(interface, proto)
    assert verifyObject(IConnectionObserver, proto.factory)
    assert verifyObject(IConnectionObserver, RSocketClientFactory(make_setup()))
    assert verifyClass(IStreamReceiver, RequestStream)
