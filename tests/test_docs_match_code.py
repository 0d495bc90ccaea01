"""The docs say what the code does: every default a page, a table or a docstring states is the
code's default, and the README's table of faces lists every twistd plugin, ``rsocket-tx``
subcommand and URI scheme the package has, with names that import and pages that exist.

The defaults are read from the code (``ConnectionConfig``'s fields, each twistd plugin's
``Options`` help, which is built from the constants), never copied into this file.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from pathlib import Path

import pytest

from rsocket_tx.core.config import ConnectionConfig

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

_UNITS = {"KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3}
_AMOUNT = re.compile(r"(\d[\d,]*)(?:\s*(KiB|MiB|GiB))?")
_DEFAULT = re.compile(r"[Dd]efault:?\s+(\d[\d,]*(?:\s*(?:KiB|MiB|GiB))?)")


def amount(text: str) -> int:
    """The first number of ``text`` (``"64 MiB"``, ``"16,777,215 bytes"``, ``"1,024"``) as an
    int, units applied."""
    match = _AMOUNT.search(text)
    assert match, f"no number in {text!r}"
    return int(match.group(1).replace(",", "")) * _UNITS.get(match.group(2) or "", 1)


def config_defaults() -> dict[str, int]:
    """ConnectionConfig's integer fields and their defaults."""
    return {f.name: f.default for f in dataclasses.fields(ConnectionConfig)
            if isinstance(f.default, int) and not isinstance(f.default, bool)}


# -- list-tables: ``setting`` | ... | default | ... ------------------------------------------


def list_table_rows(text: str) -> list[list[str]]:
    """The rows of every reST ``list-table`` in ``text``, each a list of its cells' text."""
    rows: list[list[str]] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("* - "):
            rows.append([stripped[4:]])
        elif stripped.startswith("- ") and rows and line.startswith("     "):
            rows[-1].append(stripped[2:])
        elif rows and stripped and line.startswith("       "):
            rows[-1][-1] += " " + stripped
    return rows


@pytest.mark.parametrize("page", ["limits.rst", "reliability.rst"])
def test_setting_tables_state_the_code_defaults(page):
    defaults = config_defaults()
    checked = 0
    for row in list_table_rows((DOCS / page).read_text()):
        name = re.match(r"``(\w+)``", row[0])
        if not name or name.group(1) not in defaults:
            continue
        stated = next((cell for cell in row[1:] if cell[:1].isdigit()), None)
        if stated is None:
            continue
        assert amount(stated) == defaults[name.group(1)], (
            f"docs/{page}: {name.group(1)} default {stated!r}, the code's is "
            f"{defaults[name.group(1)]:,}")
        checked += 1
    assert checked >= 5, f"docs/{page}: found only {checked} settings with a default"


# -- docstrings: ":param name: ... (default N)" ---------------------------------------------


def param_defaults(func) -> dict[str, str]:
    """``{param: stated default}`` of ``func``'s docstring, for params saying ``default N``."""
    doc = inspect.getdoc(func) or ""
    stated = {}
    for block in re.split(r"\n(?=:param )", doc):
        name = re.match(r":param (\w+):", block)
        default = _DEFAULT.search(block)
        if name and default:
            stated[name.group(1)] = default.group(1)
    return stated


def test_connect_and_serve_docstrings_state_the_code_defaults():
    from rsocket_tx import connect, serve

    defaults = config_defaults()
    checked = 0
    for func in (connect, serve):
        for name, stated in param_defaults(func).items():
            if name in defaults:
                assert amount(stated) == defaults[name], (
                    f"{func.__name__}(): {name} default {stated!r}, the code's is "
                    f"{defaults[name]:,}")
                checked += 1
    assert checked >= 10


# -- twistd options: "``--option ...``  ... Default N" --------------------------------------


def option_defaults(options_class) -> dict[str, int]:
    """``{option: default}`` of a twistd plugin's Options, from the ``(default N)`` its help
    states (the help is built from the code's constants)."""
    stated = {}
    for name, help_text in options_class().docs.items():
        match = re.search(r"default (\d+)\)", help_text or "")
        if match:
            stated[name] = int(match.group(1))
    return stated


def documented_option_defaults(text: str) -> list[tuple[str, str]]:
    """``(option, stated default)`` for each option term that starts a line of ``text`` (a
    definition list term or a simple table's first column) and states ``Default N`` in its
    entry (up to the next line starting at column 0)."""
    found = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        term = re.match(r"``--([a-z0-9-]+)", line)
        if not term:
            continue
        entry = [line[term.end():]]
        for following in lines[i + 1:]:
            if following[:1].strip():
                break
            entry.append(following)
        default = _DEFAULT.search(" ".join(entry))
        if default:
            found.append((term.group(1), default.group(1)))
    return found


def _plugin_pages() -> dict[str, str]:
    """The text documenting each twistd plugin's options."""
    text = (DOCS / "twistd.rst").read_text()
    head, mux = text.split("One port, every protocol: ``twistd mux``", 1)
    return {"rsocket": head, "mux": mux, "jini-mux": (DOCS / "jini.rst").read_text()}


@pytest.mark.parametrize("plugin,module,least", [
    ("rsocket", "rsocket_tx.faces.tap", 10),
    ("mux", "rsocket_tx.faces.mux", 3),
    ("jini-mux", "rsocket_tx.jini.tap", 1),
])
def test_twistd_docs_state_each_plugins_defaults(plugin, module, least):
    defaults = option_defaults(importlib.import_module(module).Options)
    documented = documented_option_defaults(_plugin_pages()[plugin])
    checked = 0
    for option, stated in documented:
        if option in defaults:
            assert amount(stated) == defaults[option], (
                f"docs, twistd {plugin} --{option}: default {stated!r}, the "
                f"plugin's is {defaults[option]:,}")
            checked += 1
    assert checked >= least, f"twistd {plugin}: only {checked} documented defaults found"


def test_amount_reads_the_forms_the_docs_use():
    assert amount("64 MiB") == 67_108_864
    assert amount("16,777,215 bytes") == 16_777_215
    assert amount("128 KiB (131,072)") == 131_072
    assert amount("600,000 ms (10 minutes)") == 600_000


# -- the table of faces (README.rst, included by docs/index.rst) ----------------------------


def face_table() -> list[list[str]]:
    text = (ROOT / "README.rst").read_text()
    assert ".. faces-start" in text and ".. faces-end" in text, "README.rst has no face table"
    section = text.split(".. faces-start", 1)[1].split(".. faces-end", 1)[0]
    rows = list_table_rows(section)
    assert rows and rows[0][0] == "protocol or feature"
    return rows[1:]


def _literals(cell: str) -> list[str]:
    return re.findall(r"``([^`]+)``", cell)


def test_face_table_lists_every_twistd_plugin():
    from twisted.application.service import IServiceMaker
    from twisted.plugin import getPlugins

    import twisted.plugins

    ours = {maker.tapname for maker in getPlugins(IServiceMaker, twisted.plugins)
            if maker.__module__.startswith("twisted.plugins.rsocket_tx")
            or getattr(maker, "module", "").startswith("rsocket_tx")}
    assert {"rsocket", "jini-mux", "rsnet", "rs2015", "mux"} <= ours
    listed = {lit.split()[1] for row in face_table() for lit in _literals(row[1])
              if lit.startswith("twistd ")}
    assert ours <= listed, f"twistd plugins missing from the README's table: {ours - listed}"


def test_face_table_lists_every_cli_subcommand():
    from rsocket_tx.faces.main import build_parser

    def subcommands(parser):
        for action in parser._actions:  # argparse has no public list of subparsers
            if action.__class__.__name__ == "_SubParsersAction":
                return action.choices
        return {}

    commands = set()
    for name, sub in subcommands(build_parser()).items():
        nested = subcommands(sub)
        commands |= {f"{name} {n}" for n in nested} if nested else {name}
    listed = {lit for row in face_table() for lit in _literals(row[2])}
    assert commands <= listed, (
        f"rsocket-tx subcommands missing from the README's table: {sorted(commands - listed)}")


def test_face_table_names_python_api_that_imports():
    names = [lit for row in face_table() for lit in _literals(row[3])]
    assert len(names) >= 10
    for dotted in names:
        module, _, attr = dotted.rpartition(".")
        assert hasattr(importlib.import_module(module), attr), f"{dotted} does not exist"


def test_face_table_lists_every_uri_prefix():
    from rsocket_tx.jini.tap import URI_PREFIX as JINI
    from rsocket_tx.reactivesocket.client import URI_PREFIX as RS2015
    from rsocket_tx.rsnet.endpoints import URI_PREFIX as RSNET

    listed = {lit for row in face_table() for lit in _literals(row[4])}
    for base in ("tcp://", "tls://", "ws://", "wss://"):
        assert base in listed
    assert {JINI + "tcp://", JINI + "tls://"} <= listed
    for prefix in (RSNET, RS2015):
        assert {prefix + s for s in ("tcp://", "tls://", "ws://", "wss://")} <= listed


def test_face_table_pages_exist_and_index_shows_the_table():
    pages = [lit for row in face_table() for lit in _literals(row[5])]
    assert pages
    for page in pages:
        assert (ROOT / page).is_file(), f"README's table names {page}, which does not exist"
    index = (DOCS / "index.rst").read_text()
    assert ".. include:: ../README.rst" in index and ":start-after: .. faces-start" in index
