"""The folders of the package show its layers (DESIGN §2), imports go downward only, and the
top level holds nothing else.

The layout, top to bottom::

    rsocket_tx/faces/        cli (rsocket-tx), tap (twistd rsocket),       what a user types
                             serving (what server faces share)
    rsocket_tx/apps/         demo, streamlog, orders                       responders to serve
    rsocket_tx/*.py          connect(), serve(), requester, responder,     the API
                             routing ...
    rsocket_tx/bridge.py     the protocol bridge (MuxProtocol)             the Twisted layer
    rsocket_tx/transports/   tls, websocket, endpoints, endpoint_parsers
    rsocket_tx/core/         the RSocket protocol, sans-IO                 protocols
    rsocket_tx/mux/          stream table, ids, credit ..., sans-IO        mux

The rules checked here on every module's source (every ``import``, even inside a function;
the resolution of relative imports is :func:`test_layers.imported_modules`):

* a transport imports no face, no app and nothing of the API layer;
* an app imports no face;
* the mux layer imports nothing of rsocket_tx outside ``rsocket_tx.mux``;
* the RSocket core imports nothing of the Twisted layer or above;
* the top of the package holds the layer packages and RSocket's own modules (its Twisted side
  and its API), nothing else: no alias module for an old import path. The package was never
  released, so the old paths (``rsocket_tx.cli``, ``rsocket_tx.demo`` ...) are gone, not kept;
  nothing in the repository names them (``CHANGELOG.rst`` lists them with their new names).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_layers import imported_modules

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "rsocket_tx"

#: the packages at the top of rsocket_tx: the layers (DESIGN §2) and each protocol's own
LAYER_PACKAGES = {"mux", "core", "extensions", "transports", "jini", "rsnet", "reactivesocket",
                  "yamux", "apps", "faces"}
#: the modules at the top of rsocket_tx: RSocket's Twisted side and its public API. A new
#: module at the top is a decision about its layer: make it here, or put the module in a folder.
RSOCKET_MODULES = {
    "__init__", "__main__",
    # the Twisted layer: the bridge, its seams, and RSocket's protocol side
    "bridge", "interfaces", "inbound", "pump", "protocol", "streams", "lease",
    # the API
    "client", "server", "requester", "responder", "routing", "codecs", "authentication",
    "interceptors", "reconnect", "loadbalance", "metrics", "otel", "testing",
}

#: old import path -> where that module is; the old paths were aliases, removed before the
#: first release
GONE = {
    "rsocket_tx.tls": "rsocket_tx.transports.tls",
    "rsocket_tx.websocket": "rsocket_tx.transports.websocket",
    "rsocket_tx.endpoints": "rsocket_tx.transports.endpoints",
    "rsocket_tx.endpoint_parsers": "rsocket_tx.transports.endpoint_parsers",
    "rsocket_tx.demo": "rsocket_tx.apps.demo",
    "rsocket_tx.streamlog": "rsocket_tx.apps.streamlog",
    "rsocket_tx.examples": "rsocket_tx.apps",
    "rsocket_tx.examples.orders": "rsocket_tx.apps.orders",
    "rsocket_tx.tap": "rsocket_tx.faces.tap",
    "rsocket_tx.serving": "rsocket_tx.faces.serving",
    "rsocket_tx.cli": "rsocket_tx.faces.main",
}

FACES = ("rsocket_tx.faces", "rsocket_tx.__main__")
APPS = ("rsocket_tx.apps",)
#: the API layer: the package itself (its __init__ imports the API) and its modules
API = ("rsocket_tx", "rsocket_tx.client", "rsocket_tx.server", "rsocket_tx.requester",
       "rsocket_tx.responder", "rsocket_tx.routing")
TWISTED = ("rsocket_tx.transports", "rsocket_tx.bridge", "rsocket_tx.protocol",
           "rsocket_tx.interfaces", "rsocket_tx.streams", "rsocket_tx.lease", "rsocket_tx.jini")


def under(module: str, prefixes: tuple[str, ...]) -> bool:
    """Whether ``module`` is one of ``prefixes`` or inside one of them (``from p import x``
    resolves to ``p.x``: the package alone, ``"rsocket_tx"``, matches only itself)."""
    for prefix in prefixes:
        if module == prefix:
            return True
        if prefix != "rsocket_tx" and module.startswith(prefix + "."):
            return True
    return False


def rsocket_tx_imports(path: Path) -> list[str]:
    return [m for m in imported_modules(path) if m.split(".")[0] == "rsocket_tx"]


def offending(paths: list[Path], forbidden: tuple[str, ...]) -> list[str]:
    return [f"{path.relative_to(ROOT)} imports {module}"
            for path in paths for module in rsocket_tx_imports(path)
            if under(module, forbidden)]


def folder(name: str) -> list[Path]:
    return sorted((PACKAGE / name).rglob("*.py"))


def test_the_folders_are_found() -> None:
    assert {p.name for p in folder("transports")} >= {
        "__init__.py", "tls.py", "websocket.py", "endpoints.py", "endpoint_parsers.py"}
    assert {p.name for p in folder("apps")} >= {
        "__init__.py", "demo.py", "streamlog.py", "orders.py"}
    assert {p.name for p in folder("faces")} >= {"__init__.py", "cli.py", "tap.py", "serving.py"}
    assert len(folder("mux")) >= 8 and len(folder("core")) >= 10


def test_transports_import_no_face_no_app_and_no_api() -> None:
    assert offending(folder("transports"), FACES + APPS + API) == []


def test_apps_import_no_face() -> None:
    assert offending(folder("apps"), FACES) == []


def test_mux_imports_nothing_outside_mux() -> None:
    found = [f"{p.relative_to(ROOT)} imports {m}" for p in folder("mux")
             for m in rsocket_tx_imports(p) if not under(m, ("rsocket_tx.mux",))]
    assert found == []


def test_core_imports_nothing_of_the_twisted_layer_or_above() -> None:
    assert offending(folder("core"), TWISTED + API + APPS + FACES) == []


def test_the_rules_catch_an_upward_import(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # the check is live: a transport importing an app and (inside a function) faces
    import test_layers

    for module in (test_layers, sys.modules[__name__]):
        monkeypatch.setattr(module, "ROOT", tmp_path)
    transports = tmp_path / "rsocket_tx" / "transports"
    transports.mkdir(parents=True)
    sample = transports / "x.py"
    sample.write_text("from ..apps.demo import DemoResponder\n"
                      "def f():\n    import rsocket_tx.faces.cli\n    from ..faces import tap\n")
    where = "rsocket_tx/transports/x.py imports"
    assert offending([sample], FACES + APPS) == [
        f"{where} rsocket_tx.apps.demo", f"{where} rsocket_tx.apps.demo.DemoResponder",
        f"{where} rsocket_tx.faces.cli", f"{where} rsocket_tx.faces",
        f"{where} rsocket_tx.faces.tap"]
    assert offending([sample], ("rsocket_tx.core",)) == []
    assert not under("rsocket_tx.core.errors", API) and under("rsocket_tx", API)


# -- the top level: layers and RSocket's modules, no alias of an old path ---------------------

def top_level() -> tuple[set[str], set[str]]:
    """The packages (folders holding Python source) and the modules at the top of rsocket_tx.
    A folder with no source left (``__pycache__`` of a removed module) is no package."""
    packages = {p.name for p in PACKAGE.iterdir()
                if p.is_dir() and p.name != "__pycache__" and any(p.rglob("*.py"))}
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    return packages, modules


def test_the_top_level_holds_only_the_layers_and_the_rsocket_modules() -> None:
    packages, modules = top_level()
    assert packages == LAYER_PACKAGES, (
        f"unexpected packages {sorted(packages - LAYER_PACKAGES)}, "
        f"missing {sorted(LAYER_PACKAGES - packages)}")
    assert modules == RSOCKET_MODULES, (
        f"unexpected modules {sorted(modules - RSOCKET_MODULES)}, "
        f"missing {sorted(RSOCKET_MODULES - modules)}")


def test_the_top_level_holds_no_old_name() -> None:
    packages, modules = top_level()
    at_the_top = packages | modules
    assert [old for old in sorted(GONE) if old.split(".")[1] in at_the_top] == []


def importable(name: str) -> bool:
    """Whether ``import name`` finds code (a folder left with only ``__pycache__`` after its
    modules were removed imports as an empty namespace package: that is no code)."""
    try:
        spec = importlib.util.find_spec(name)
    except ModuleNotFoundError:  # its parent package is missing
        return False
    return spec is not None and spec.origin is not None


@pytest.mark.parametrize("old", sorted(GONE))
def test_an_old_import_path_is_gone(old: str) -> None:
    assert not importable(old), f"{old} is importable"
    assert importable(GONE[old]), GONE[old]


def aliases_in(path: Path) -> list[str]:
    """Statements of ``path`` that put a module in ``sys.modules`` under another name (how an
    alias module keeps an old import path alive)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [f"line {node.lineno}: {ast.unparse(node)}" for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            and any(isinstance(target, ast.Subscript) and ast.unparse(target.value) == "sys.modules"
                    for target in node.targets)]


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")),
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_an_alias(path: Path) -> None:
    assert aliases_in(path) == []


def test_an_alias_module_is_found(tmp_path: Path) -> None:
    # the check is live: the shape every removed alias had
    sample = tmp_path / "demo.py"
    sample.write_text("import sys\n\nfrom .apps import demo as _module\n\n"
                      "sys.modules[__name__] = _module\n")
    assert aliases_in(sample) == ["line 5: sys.modules[__name__] = _module"]


#: ``rsocket_tx.demo``, ``"rsocket_tx.cli:main"``, ``from rsocket_tx import tap`` ... (not
#: ``rsocket_tx.apps.demo``); and the relative ``from ..demo import`` of a package module
_OLD_NAME = re.compile(
    r"(?<![\w.])rsocket_tx\.(?:cli|tap|serving|tls|websocket|endpoints|endpoint_parsers|demo"
    r"|streamlog|examples)\b"
    r"|\bfrom rsocket_tx import [\w, ]*\b(?:cli|tap|serving|tls|websocket|endpoints"
    r"|endpoint_parsers|demo|streamlog|examples)\b")
#: what the repository holds that may name a module (the changelog lists the old names)
_SOURCES = ("rsocket_tx", "pyspark_rsocket", "tests", "docs", "examples", "benchmarks", "fuzz",
            "scripts", "twisted")
_SUFFIXES = {".py", ".rst", ".md", ".cfg", ".toml", ".sh", ".tac", ".js", ".java", ".txt"}
_SKIP = {"__pycache__", "node_modules", "target", "build", "_build", "dist"}


def files_naming_old_paths() -> list[str]:
    found = []
    tops = [ROOT / name for name in _SOURCES] + [
        ROOT / name for name in ("README.rst", "Makefile", "setup.cfg", "pyproject.toml")]
    for top in tops:
        walk = os.walk(top) if top.is_dir() else [(str(top.parent), [], [top.name])]
        for folder_name, dirs, files in walk:
            dirs[:] = [d for d in dirs if d not in _SKIP and not d.startswith(".")]
            for name in files:
                path = Path(folder_name, name)
                if path == Path(__file__) or not (path.suffix in _SUFFIXES or name == "Makefile"):
                    continue
                for number, line in enumerate(
                        path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                    if _OLD_NAME.search(line):
                        found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    return found


def test_nothing_names_an_old_import_path() -> None:
    """Imports, ``module:Class`` strings, ``mock.patch`` targets, docs and command examples
    name the new modules (``CHANGELOG.rst`` says where each old one went)."""
    assert files_naming_old_paths() == []


@pytest.mark.parametrize("text, named", [
    ("from rsocket_tx.demo import DemoResponder", True),
    ("--responder rsocket_tx.examples.orders:OrderService", True),
    ('mock.patch("rsocket_tx.endpoints.client_endpoint")', True),
    ("from rsocket_tx import Payload, cli", True),
    (":mod:`~rsocket_tx.tls`", True),
    ("from rsocket_tx.apps.demo import DemoResponder", False),
    ("rsocket_tx.transports.tls_error", False),
    ("rsocket_tx.tapping", False),
    ("from rsocket_tx import Payload, serve", False),
])
def test_an_old_import_path_is_recognised(text: str, named: bool) -> None:
    assert bool(_OLD_NAME.search(text)) is named


def test_the_twistd_plugin_names_the_new_module() -> None:
    from twisted.application.service import IServiceMaker
    from twisted.plugin import getPlugins

    from rsocket_tx.faces import tap

    (rsocket,) = [p for p in getPlugins(IServiceMaker) if p.tapname == "rsocket"]
    assert rsocket.module == "rsocket_tx.faces.tap"
    assert rsocket.options is tap.Options and rsocket.makeService is tap.makeService


def test_the_console_script_names_the_new_module() -> None:
    import configparser

    from twisted.python.reflect import namedAny

    from rsocket_tx.faces.main import main

    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    scripts = setup.get("options.entry_points", "console_scripts").strip()
    assert scripts == "rsocket-tx = rsocket_tx.faces.main:main"
    assert namedAny("rsocket_tx.faces.main.main") is main


@pytest.mark.parametrize("module", ["rsocket_tx", "rsocket_tx.faces.main"])
def test_python_dash_m_runs_the_command_line(module: str) -> None:
    """``python -m`` with the package and with the module: the same command line (a
    subcommand of the Jini face works too)."""
    for argv, usage in ((["--help"], "usage: rsocket-tx [-h] [--version] COMMAND"),
                        (["jini", "--help"], "usage: rsocket-tx jini [-h] JINI_COMMAND")):
        result = subprocess.run([sys.executable, "-m", module, *argv], capture_output=True,
                                text=True, timeout=120, cwd=ROOT)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(usage), result.stdout
        assert result.stderr == ""
