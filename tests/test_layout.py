"""The folders of the package show its layers (DESIGN §2), imports go downward only, and the
modules that moved into the folders stay importable under their old names.

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
* inside the package, modules import the new names, not the old ones (those are for users).

An old name (``rsocket_tx.tls`` ...) is a tiny alias module that puts the new module in
``sys.modules`` under the old name: both names are the same module object, so ``import``,
``from ... import``, ``unittest.mock.patch`` targets, pickles and ``module:Class`` strings
(``twistd rsocket --responder``) that use the old name keep working.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
from test_layers import imported_modules

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "rsocket_tx"

#: old name -> new name of every module that moved into a layer folder
MOVED = {
    "rsocket_tx.tls": "rsocket_tx.transports.tls",
    "rsocket_tx.websocket": "rsocket_tx.transports.websocket",
    "rsocket_tx.endpoints": "rsocket_tx.transports.endpoints",
    "rsocket_tx.endpoint_parsers": "rsocket_tx.transports.endpoint_parsers",
    "rsocket_tx.demo": "rsocket_tx.apps.demo",
    "rsocket_tx.streamlog": "rsocket_tx.apps.streamlog",
    "rsocket_tx.examples.orders": "rsocket_tx.apps.orders",
    "rsocket_tx.tap": "rsocket_tx.faces.tap",
    "rsocket_tx.serving": "rsocket_tx.faces.serving",
    "rsocket_tx.cli": "rsocket_tx.faces.main",
}

FACES = ("rsocket_tx.faces", "rsocket_tx.cli", "rsocket_tx.tap", "rsocket_tx.serving",
         "rsocket_tx.__main__")
APPS = ("rsocket_tx.apps", "rsocket_tx.demo", "rsocket_tx.streamlog", "rsocket_tx.examples")
#: the API layer: the package itself (its __init__ imports the API) and its modules
API = ("rsocket_tx", "rsocket_tx.client", "rsocket_tx.server", "rsocket_tx.requester",
       "rsocket_tx.responder", "rsocket_tx.routing")
TWISTED = ("rsocket_tx.transports", "rsocket_tx.bridge", "rsocket_tx.protocol",
           "rsocket_tx.interfaces", "rsocket_tx.streams", "rsocket_tx.lease",
           "rsocket_tx.tls", "rsocket_tx.websocket", "rsocket_tx.endpoints",
           "rsocket_tx.endpoint_parsers", "rsocket_tx.jini")


def module_path(name: str) -> Path:
    """The source file of the rsocket_tx module ``name`` (a package's ``__init__.py``)."""
    base = ROOT.joinpath(*name.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


ALIASES = [module_path(old) for old in MOVED]


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


def test_the_package_imports_the_new_names() -> None:
    """The old names are for users; inside the package only the alias modules use them."""
    modules = [p for p in sorted(PACKAGE.rglob("*.py")) if p not in ALIASES]
    assert offending(modules, tuple(MOVED)) == []


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
                      "def f():\n    from .. import cli\n    from ..faces import tap\n")
    where = "rsocket_tx/transports/x.py imports"
    assert offending([sample], FACES + APPS) == [
        f"{where} rsocket_tx.apps.demo", f"{where} rsocket_tx.apps.demo.DemoResponder",
        f"{where} rsocket_tx.cli", f"{where} rsocket_tx.faces", f"{where} rsocket_tx.faces.tap"]
    assert offending([sample], ("rsocket_tx.core",)) == []
    assert not under("rsocket_tx.core.errors", API) and under("rsocket_tx", API)


# -- the old names ----------------------------------------------------------------------------

_SAME_MODULE = r"""
import importlib, sys
old, new = sys.argv[1:]
module = importlib.import_module(old)  # the old name first, in a fresh interpreter
assert module is importlib.import_module(new), (module, new)
assert sys.modules[old] is sys.modules[new] is module
assert module.__name__ == new, module.__name__
parent, _, leaf = old.rpartition(".")
assert getattr(sys.modules[parent], leaf) is module
namespace = {}
exec(f"from {parent} import {leaf} as found", namespace)
assert namespace["found"] is module
exec(f"import {old} as found", namespace)
assert namespace["found"] is module
print("ok")
"""


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_name_is_the_new_module(old: str) -> None:
    result = subprocess.run([sys.executable, "-c", _SAME_MODULE, old, MOVED[old]],
                            capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0 and result.stdout == "ok\n", result.stderr


@pytest.mark.parametrize("path", ALIASES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_an_alias_module_defines_nothing(path: Path) -> None:
    """The alias is the old file: a docstring, the import of the new module, and the
    ``sys.modules`` entry (nothing else that could drift from the new module)."""
    import ast

    body = ast.parse(path.read_text(encoding="utf-8")).body
    kinds = [type(node).__name__ for node in body]
    if path.name == "cli.py":  # python -m rsocket_tx.cli runs the command line instead
        assert kinds == ["Expr", "Import", "ImportFrom", "If"], kinds
        assert ast.unparse(body[3]) == ("if __name__ == '__main__':\n    _module.main()\n"
                                        "else:\n    sys.modules[__name__] = _module")
    else:
        assert kinds == ["Expr", "Import", "ImportFrom", "Assign"], kinds
        assert ast.unparse(body[3]) == "sys.modules[__name__] = _module"


def test_mock_patch_through_an_old_name_patches_the_module() -> None:
    import rsocket_tx.transports.endpoints as endpoints

    with mock.patch("rsocket_tx.endpoints.client_endpoint") as fake:
        assert endpoints.client_endpoint is fake
    assert endpoints.client_endpoint is not fake


@pytest.mark.parametrize("old, name", [
    ("rsocket_tx.tls", "TLSError"),
    ("rsocket_tx.websocket", "WebSocketServerEndpoint"),
    ("rsocket_tx.endpoint_parsers", "WebSocketClientParser"),
    ("rsocket_tx.demo", "DemoResponder"),
    ("rsocket_tx.streamlog", "StreamLog"),
    ("rsocket_tx.examples.orders", "OrderService"),
    ("rsocket_tx.tap", "RSocketServerService"),
    ("rsocket_tx.serving", "SettingsError"),
])
def test_pickles_naming_either_module_load(old: str, name: str) -> None:
    import importlib

    cls = getattr(importlib.import_module(MOVED[old]), name)
    # a pickle written before the move names the old module (protocol 0: "c<module>\n<name>\n")
    assert pickle.loads(f"c{old}\n{name}\n.".encode()) is cls
    assert MOVED[old].encode() in pickle.dumps(cls)  # new pickles name the new module
    assert pickle.loads(pickle.dumps(cls)) is cls


def test_responder_strings_with_an_old_name_load() -> None:
    from twisted.python.reflect import namedAny

    from rsocket_tx.apps.demo import DemoResponder
    from rsocket_tx.apps.orders import OrderService

    assert namedAny("rsocket_tx.demo.DemoResponder") is DemoResponder
    assert namedAny("rsocket_tx.examples.orders.OrderService") is OrderService


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
    assert namedAny("rsocket_tx.faces.main.main") is namedAny("rsocket_tx.cli.main") is main


@pytest.mark.parametrize("module", ["rsocket_tx", "rsocket_tx.cli", "rsocket_tx.faces.main"])
def test_python_dash_m_runs_the_command_line(module: str) -> None:
    """``python -m`` with the package, the old and the new module name: the same command line
    (a subcommand of the Jini face works too)."""
    for argv, usage in ((["--help"], "usage: rsocket-tx [-h] [--version] COMMAND"),
                        (["jini", "--help"], "usage: rsocket-tx jini [-h] JINI_COMMAND")):
        result = subprocess.run([sys.executable, "-m", module, *argv], capture_output=True,
                                text=True, timeout=120, cwd=ROOT)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(usage), result.stdout
        assert result.stderr == ""
