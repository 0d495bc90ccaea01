"""yamux is written as an outside author would write it: on the framework's documented public
API alone (issue 26).

* Every ``rsocket_tx`` module a module of ``rsocket_tx/yamux`` imports (at any depth, even
  inside a function) is yamux's own or one of the modules ``docs/framework.rst`` lists as the
  framework's API (between ``.. framework-api-start`` and ``.. framework-api-end``).
* Every name it imports from them is public: no leading underscore, and in the module's
  ``__all__``.
* It uses no other module's underscore names (``obj._x`` with ``obj`` not ``self``/``cls``).
* Every attribute of the bridge (:class:`~rsocket_tx.bridge.MuxProtocol`) that yamux's
  protocol uses is documented there: named in the bridge's module or class docstring, or
  carrying a docstring or a ``#:`` comment of its own.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest
from test_layers import foreign_underscore_names

ROOT = Path(__file__).resolve().parents[2]
YAMUX = sorted((ROOT / "rsocket_tx" / "yamux").glob("*.py"))
GUIDE = ROOT / "docs" / "framework.rst"


def framework_api() -> set[str]:
    """The modules ``docs/framework.rst`` lists as the framework's API."""
    text = GUIDE.read_text(encoding="utf-8")
    listed = text.split(".. framework-api-start", 1)[1].split(".. framework-api-end", 1)[0]
    return set(re.findall(r":mod:`~?(rsocket_tx(?:\.\w+)*)`", listed))


def resolve(path: Path, node: ast.ImportFrom) -> str:
    package = ["rsocket_tx", "yamux"]
    if node.level:
        base = package[:len(package) - node.level + 1]
        return ".".join(base + ([node.module] if node.module else []))
    return node.module or ""


def is_module(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


def framework_imports(path: Path) -> list[tuple[str, str | None]]:
    """``(module, name)`` for each rsocket_tx import of ``path`` outside yamux (name None for
    ``import module``)."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names if a.name.startswith("rsocket_tx")]
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            module = resolve(path, node)
            if not module.startswith("rsocket_tx"):
                continue
            for alias in node.names:
                if is_module(f"{module}.{alias.name}"):
                    found.append((f"{module}.{alias.name}", None))
                else:
                    found.append((module, alias.name))
    own = ("rsocket_tx.yamux",)
    return [(m, n) for m, n in found if not (m == own[0] or m.startswith(own[0] + "."))]


def test_the_guide_lists_the_framework_api() -> None:
    api = framework_api()
    assert {"rsocket_tx.mux", "rsocket_tx.bridge", "rsocket_tx.interfaces",
            "rsocket_tx.faces.clikit", "rsocket_tx.faces.serving"} <= api
    assert all(is_module(m) for m in api)


@pytest.mark.parametrize("path", YAMUX, ids=lambda p: p.name)
def test_yamux_imports_only_the_documented_framework_api(path: Path) -> None:
    api = framework_api()
    for module, name in framework_imports(path):
        assert module in api, (f"yamux/{path.name} imports {module}, which docs/framework.rst"
                               " does not list as the framework's API")
        if name is None:
            continue
        assert not name.startswith("_"), f"yamux/{path.name} imports {module}.{name}"
        exported = getattr(importlib.import_module(module), "__all__", ())
        assert name in exported, (f"yamux/{path.name} imports {module}.{name}, which is not in "
                                  f"{module}.__all__ (not public)")


@pytest.mark.parametrize("path", YAMUX, ids=lambda p: p.name)
def test_yamux_uses_no_underscore_name_of_another_module(path: Path) -> None:
    assert foreign_underscore_names(path) == []


def documented_bridge_names() -> set[str]:
    """The bridge's names a subclass may use: in its module or class docstring, with a
    docstring of their own, or after a ``#:`` comment."""
    from rsocket_tx import bridge

    source = Path(bridge.__file__).read_text(encoding="utf-8")
    text = (bridge.__doc__ or "") + (bridge.MuxProtocol.__doc__ or "")
    names = set(re.findall(r"(?:MuxProtocol\.|:ivar |:attr:`~?)(\w+)", text))
    names |= set(re.findall(r"#:[^\n]*\n\s*(?:self\.)?(\w+)\s*[:=]", source))
    for name, value in vars(bridge.MuxProtocol).items():
        if callable(value) or isinstance(value, property):
            if getattr(value, "__doc__", None):
                names.add(name)
    return names


def bridge_names() -> set[str]:
    from twisted.internet.task import Clock

    from rsocket_tx.bridge import MuxProtocol

    return set(vars(MuxProtocol(Clock(), max_send_buffer_size=1))) | set(dir(MuxProtocol))


def test_every_bridge_attribute_yamux_uses_is_documented() -> None:
    tree = ast.parse((ROOT / "rsocket_tx" / "yamux" / "protocol.py").read_text("utf-8"))
    used = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name) and node.value.id in ("self", "session")}
    from twisted.internet.protocol import Protocol

    inherited = (used & bridge_names()) - set(dir(Protocol)) - {"__init__"}
    from rsocket_tx.yamux.protocol import YamuxProtocol, YamuxStreamTransport

    own = set(vars(YamuxProtocol)) | set(vars(YamuxStreamTransport))
    missing = sorted(n for n in inherited - own if n not in documented_bridge_names())
    assert inherited and missing == [], f"undocumented bridge names yamux uses: {missing}"
