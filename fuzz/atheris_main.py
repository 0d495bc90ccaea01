"""Run one fuzz target under atheris (libFuzzer): ``python -m fuzz.atheris_main TARGET
[libFuzzer flags] [corpus dirs]``. :mod:`fuzz.run` starts it; it can also be run by hand, e.g.
to reproduce a crash: ``python -m fuzz.atheris_main rsocket_server crash-1234``.

The modules a target names in ``INSTRUMENT`` (package prefixes; default all of ``rsocket_tx``)
are imported inside :func:`atheris.instrument_imports`, so their coverage guides the fuzzer;
the target and the harness are not instrumented.
"""

from __future__ import annotations

import importlib.util
import sys

import atheris


def _bare_package() -> None:
    """Register the ``rsocket_tx`` package without running its ``__init__`` (which imports
    the API layer and Twisted, seconds of start-up): the sans-IO modules the targets import
    need neither (tests/test_layers.py keeps it so)."""
    spec = importlib.util.find_spec("rsocket_tx")
    assert spec is not None and spec.submodule_search_locations is not None
    sys.modules["rsocket_tx"] = importlib.util.module_from_spec(spec)


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        sys.exit("usage: python -m fuzz.atheris_main TARGET [libFuzzer flags] [corpus dirs]")
    name = sys.argv[1]
    from fuzz import targets  # (imports no rsocket_tx module)
    _bare_package()
    path = targets.source(name)
    with atheris.instrument_imports(include=list(targets.instrumented(path))):
        module = targets.load(name)
    atheris.Setup([sys.argv[0]] + sys.argv[2:], module.one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
