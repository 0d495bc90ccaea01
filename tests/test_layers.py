"""The layering rules of docs DESIGN §2, enforced (as trio's core enforces its own).

- The sans-IO layers (``rsocket_tx/mux``, ``rsocket_tx/core``, and the Jini mux's
  ``rsocket_tx/jini/codec.py`` and ``connection.py`` once they exist) import no Twisted
  (nor zope.interface): checked on their source (every ``import``, even inside a function) and
  by importing them in a fresh interpreter whose import system refuses ``twisted``.
- The mux layer is the bottom: it imports only the standard library and itself.
- The RSocket core sits right above it: it imports only the standard library, itself and the
  mux layer.
- Library code never depends on the sample apps (``rsocket_tx/apps``): only the faces
  (``rsocket_tx/faces``) and the apps themselves import them. The demo responder is the
  default of ``twistd rsocket`` and ``rsocket-tx serve``, not of ``serve()`` or a factory.
- The faces (each protocol's ``rsocket-tx`` commands and twistd plugin) import the face kit
  (``rsocket_tx/faces/clikit.py``, ``serving.py``), never another protocol's face; the kit and
  the modules the faces share import no face. Only the ``rsocket-tx`` command itself
  (``rsocket_tx/faces/main.py``) imports every face.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "rsocket_tx"

MUX = sorted((PACKAGE / "mux").glob("*.py"))
CORE = sorted((PACKAGE / "core").glob("*.py"))
JINI_SANS_IO = [p for p in (PACKAGE / "jini" / "codec.py", PACKAGE / "jini" / "connection.py")
                if p.exists()]
#: the Reactive Streams network protocol's sans-IO modules (the package also holds Twisted ones)
RSNET_SANS_IO = [PACKAGE / "rsnet" / f"{name}.py"
                 for name in ("codec", "config", "connection", "errors", "events")
                 if (PACKAGE / "rsnet" / f"{name}.py").exists()]
#: yamux's sans-IO modules (the package also holds its Twisted side and faces)
YAMUX_SANS_IO = [PACKAGE / "yamux" / f"{name}.py"
                 for name in ("__init__", "codec", "config", "connection", "errors", "events")]
SANS_IO = MUX + CORE + JINI_SANS_IO + RSNET_SANS_IO + YAMUX_SANS_IO

FORBIDDEN = ("twisted", "zope")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path) -> list[str]:
    """Every module ``path`` imports, as absolute names (relative imports resolved; for
    ``from package import name`` both the package and ``package.name``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    name = module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module != "__future__":
                found.append(module)
                found += [f"{module}.{alias.name}" for alias in node.names]
    return found


def top(module: str) -> str:
    return module.split(".")[0]


def test_the_layers_are_found() -> None:
    assert len(MUX) >= 8 and len(CORE) >= 10
    assert PACKAGE / "mux" / "__init__.py" in MUX


@pytest.mark.parametrize("path", SANS_IO, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_sans_io_source_imports_no_twisted(path: Path) -> None:
    bad = [m for m in imported_modules(path) if top(m) in FORBIDDEN]
    assert bad == [], f"{path.relative_to(ROOT)} imports {bad}: the sans-IO layers do no I/O"


@pytest.mark.parametrize("path", MUX, ids=lambda p: p.name)
def test_mux_imports_only_the_standard_library_and_itself(path: Path) -> None:
    for module in imported_modules(path):
        if top(module) == "rsocket_tx":
            assert module == "rsocket_tx.mux" or module.startswith("rsocket_tx.mux."), (
                f"{path.name} imports {module}: the mux layer imports nothing above it")
        else:
            assert top(module) in sys.stdlib_module_names, (
                f"{path.name} imports {module}: the mux layer is pure Python")


@pytest.mark.parametrize("path", CORE, ids=lambda p: p.name)
def test_core_imports_only_itself_and_the_mux_layer(path: Path) -> None:
    for module in imported_modules(path):
        if top(module) == "rsocket_tx":
            assert module.split(".")[1] in ("core", "mux"), (
                f"core/{path.name} imports {module}: the RSocket core sits on the mux layer only")
        else:
            assert top(module) in sys.stdlib_module_names, (
                f"core/{path.name} imports {module}: the RSocket core needs no third party")


#: the packages that may import the apps: the apps themselves and the faces that serve them
APP_USERS = ("apps", "faces")
LIBRARY = [p for p in sorted(PACKAGE.rglob("*.py"))
           if p.relative_to(PACKAGE).parts[0] not in APP_USERS]


def imports_of_apps(path: Path) -> list[str]:
    """The modules of ``rsocket_tx.apps`` (or the package itself) that ``path`` imports."""
    return [m for m in imported_modules(path)
            if m == "rsocket_tx.apps" or m.startswith("rsocket_tx.apps.")]


def test_library_modules_are_found() -> None:
    names = {str(p.relative_to(PACKAGE)) for p in LIBRARY}
    assert {"server.py", "protocol.py", "__init__.py", "jini/server.py",
            "transports/endpoints.py"} <= names
    assert not any(name.startswith(("apps/", "faces/")) for name in names)


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_library_code_imports_no_app(path: Path) -> None:
    # DESIGN §2: library code never depends on sample apps (serve() included: it has no
    # default responder; the demo is the default of the faces only)
    assert imports_of_apps(path) == [], (
        f"{path.relative_to(ROOT)} imports an app: only rsocket_tx/faces may")


def test_an_import_of_an_app_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the check is live: a lazy import inside a function, relative or absolute
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    package = tmp_path / "rsocket_tx"
    package.mkdir()
    sample = package / "server.py"
    sample.write_text("def serve(factory=None):\n    from .apps.demo import DemoResponder\n"
                      "    import rsocket_tx.apps.streamlog\n")
    assert imports_of_apps(sample) == ["rsocket_tx.apps.demo",
                                       "rsocket_tx.apps.demo.DemoResponder",
                                       "rsocket_tx.apps.streamlog"]


def foreign_underscore_names(path: Path) -> list[str]:
    """Underscore names of other modules that ``path`` uses: ``from m import _name``, and
    ``x._name`` where ``x`` is neither ``self``/``cls`` nor a class of the same module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    own = {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            source = "." * node.level + (node.module or "")
            found += [f"from {source} import {alias.name} (line {node.lineno})"
                      for alias in node.names if alias.name.startswith("_")]
        elif (isinstance(node, ast.Attribute) and node.attr.startswith("_")
              and not node.attr.startswith("__")):
            owner = node.value
            if not (isinstance(owner, ast.Name) and owner.id in {"self", "cls"} | own):
                found.append(f"{ast.unparse(node)} (line {node.lineno})")
    return found


@pytest.mark.parametrize("path", SANS_IO, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_sans_io_modules_use_no_foreign_underscore_names(path: Path) -> None:
    # DESIGN §2: seams are interfaces, not private reaches
    assert foreign_underscore_names(path) == []


def test_foreign_underscore_names_are_found(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("from .m import _hidden, shown\n"
                      "class A:\n"
                      "    def f(self, other):\n"
                      "        return self._x, A._y, other._z, other.__class__\n")
    assert foreign_underscore_names(sample) == ["from .m import _hidden (line 1)",
                                                "other._z (line 4)"]


def test_imported_modules_resolves_relative_imports() -> None:
    # the helper itself: relative imports of the core resolve inside rsocket_tx
    found = imported_modules(PACKAGE / "core" / "connection.py")
    assert "rsocket_tx.core.errors" in found and "rsocket_tx.mux.streams" in found


# In a fresh interpreter: the packages whose __init__ belongs to the Twisted layer
# (rsocket_tx itself, rsocket_tx.jini, rsocket_tx.rsnet) are stand-ins with the right __path__,
# so only the sans-IO modules and what they import run.
_PROBE = r"""
import importlib, importlib.abc, json, sys, types

FORBIDDEN = ("twisted", "zope")

class RefuseTwisted(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in FORBIDDEN:
            raise ImportError(f"the sans-IO layers must not import {name}")
        return None

assert not [m for m in sys.modules if m.split(".")[0] in FORBIDDEN], "imported at startup"
sys.meta_path.insert(0, RefuseTwisted())
try:
    import twisted.internet.reactor  # noqa: F401
except ImportError:
    pass
else:
    raise SystemExit("the import hook did not refuse twisted")

root, modules = sys.argv[1], json.loads(sys.argv[2])
stubs = ("rsocket_tx", "rsocket_tx.jini", "rsocket_tx.rsnet")
for package in stubs:
    stub = types.ModuleType(package)
    stub.__path__ = [root + "/" + package.replace(".", "/")]
    sys.modules[package] = stub
for name in modules:
    importlib.import_module(name)
print(json.dumps(sorted(m for m in sys.modules if m.startswith("rsocket_tx") and m not in stubs)))
"""


def probe(modules: list[str]) -> list[str]:
    """Import ``modules`` in a fresh interpreter that refuses twisted; return the rsocket_tx
    modules that got imported (the stand-in packages left out)."""
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(ROOT), json.dumps(modules)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_sans_io_layers_import_without_twisted() -> None:
    modules = [module_name(p) for p in SANS_IO]
    loaded = probe(modules)
    assert set(modules) <= set(loaded)


def test_mux_layer_loads_nothing_above_it() -> None:
    loaded = probe([module_name(p) for p in MUX])
    assert [m for m in loaded if not m.startswith("rsocket_tx.mux")] == []


def test_probe_catches_a_twisted_import() -> None:
    # the check is live: a Twisted-layer module fails it
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(ROOT),
                           json.dumps(["rsocket_tx.transports.endpoints"])],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode != 0
    assert "must not import twisted" in proc.stderr


# -- faces -------------------------------------------------------------------------------------

#: Each protocol's face modules: its ``rsocket-tx`` commands and its twistd plugin (``twistd
#: mux`` serves several protocols, naming their plugins as strings, so it is a face of its own).
FACES = {
    "rsocket": ("faces/cli.py", "faces/tap.py"),
    "jini": ("jini/cli.py", "jini/tap.py"),
    "rsnet": ("rsnet/cli.py", "rsnet/tap.py"),
    "rs2015": ("reactivesocket/cli.py", "reactivesocket/tap.py"),
    "yamux": ("yamux/cli.py", "yamux/tap.py"),
    "mux": ("faces/mux.py",),
}
#: The ``rsocket-tx`` command, which gathers every face's commands.
TOP = ("faces/main.py",)
#: The face kit and the modules faces share: they import no face.
KIT = ("faces/clikit.py", "faces/serving.py", "faces/framelog.py", "faces/rsocket_settings.py")


def face_module(relative: str) -> str:
    """``"jini/cli.py"`` -> ``"rsocket_tx.jini.cli"``."""
    return "rsocket_tx." + relative.removesuffix(".py").replace("/", ".")


def face_of(module: str) -> str | None:
    """The protocol whose face ``module`` is (or is in), or None."""
    for protocol, paths in FACES.items():
        if any(module == face_module(p) for p in paths):
            return protocol
    return "top" if module in {face_module(p) for p in TOP} else None


def faces_imported(path: Path) -> set[str]:
    """The faces (protocol names, ``"top"`` for the ``rsocket-tx`` command) ``path`` imports."""
    return {face for face in map(face_of, imported_modules(path)) if face is not None}


FACE_PATHS = [(protocol, PACKAGE / p) for protocol, paths in FACES.items() for p in paths
              if (PACKAGE / p).exists()]


def test_the_faces_and_the_kit_are_found() -> None:
    found = {protocol for protocol, _ in FACE_PATHS}
    assert found == set(FACES)
    assert all((PACKAGE / p).exists() for p in KIT + TOP)


@pytest.mark.parametrize(("protocol", "path"), FACE_PATHS,
                         ids=lambda v: str(v.relative_to(PACKAGE)) if isinstance(v, Path) else v)
def test_no_face_imports_another_protocols_face(protocol: str, path: Path) -> None:
    others = faces_imported(path) - {protocol}
    assert others == set(), (
        f"{path.relative_to(ROOT)} ({protocol}'s face) imports the face of {sorted(others)}:"
        " move what they share into the face kit (rsocket_tx/faces/clikit.py, serving.py)")


@pytest.mark.parametrize("relative", KIT)
def test_the_kit_imports_no_face(relative: str) -> None:
    path = PACKAGE / relative
    assert faces_imported(path) == set(), f"{relative} imports a face"


def test_the_command_gathers_every_face() -> None:
    assert faces_imported(PACKAGE / "faces" / "main.py") - {"top"} == set(FACES) - {"mux"}


def test_faces_imported_sees_a_relative_import_of_a_face(tmp_path: Path, monkeypatch) -> None:
    """The check resolves ``from ..faces import tap`` (how the 2015 draft's face once took
    RSocket's) and a function-level ``from ..jini.cli import ...``."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    sample = tmp_path / "rsocket_tx" / "reactivesocket" / "x.py"
    sample.parent.mkdir(parents=True)
    sample.write_text("from ..faces import tap as rsocket_tap\n"
                      "def f():\n    from ..jini.cli import add_parser\n", encoding="utf-8")
    assert faces_imported(sample) == {"rsocket", "jini"}
