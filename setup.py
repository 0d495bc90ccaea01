"""Build of rsocket_tx: the metadata is in setup.cfg; this file adds the compiled build.

The modules of ``rsocket_tx.build.COMPILED_MODULES`` (the sans-IO layers) are compiled with
mypyc (shipped with mypy, in ``[build-system] requires``) when it imports and a C compiler
works. Anything else gives the pure-Python package, never a failed install:

* ``RSOCKET_TX_PURE=1`` in the environment of ``pip install``: pure Python, asked for (an
  editable install then also removes the compiled modules an earlier build left in the tree);
* mypyc missing (``--no-build-isolation`` without mypy), mypyc failing, or no C compiler: a
  warning, then pure Python.

``rsocket_tx.build.compiled`` (and ``rsocket-tx --version``) says which build runs.
"""

from __future__ import annotations

import ast
import os
import sys
import traceback
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
#: set to 1 (or true, yes) at install time for the pure-Python build
PURE_SWITCH = "RSOCKET_TX_PURE"
#: the name of mypyc's shared library (one for every compiled module; each module's own
#: extension is a small shim that loads it)
GROUP = "rsocket_tx"


def warn(message: str) -> None:
    print(f"rsocket_tx setup.py: {message}", file=sys.stderr)


def compiled_module_names() -> tuple[str, ...]:
    """``COMPILED_MODULES`` of rsocket_tx/build.py, read without importing the package (its
    dependencies are not in the build environment)."""
    tree = ast.parse((HERE / "rsocket_tx" / "build.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and node.target.id == "COMPILED_MODULES" and node.value is not None):
            return tuple(ast.literal_eval(node.value))
    raise RuntimeError("rsocket_tx/build.py has no COMPILED_MODULES")


def remove_in_tree_builds() -> None:
    """Delete the extension modules an earlier in-place (editable) compiled build left next
    to the sources: Python imports an extension before the ``.py`` beside it, so they would
    shadow the pure build (and any edit made since)."""
    for name in compiled_module_names():
        source = HERE.joinpath(*name.split("."))
        for built in source.parent.glob(source.name + ".*"):
            if built.suffix in (".so", ".pyd"):
                built.unlink()
    for pattern in (f"{GROUP}__mypyc.*.so", f"{GROUP}__mypyc.*.pyd"):
        for built in HERE.glob(pattern):
            built.unlink()


def pure_requested() -> bool:
    return os.environ.get(PURE_SWITCH, "").strip().lower() in ("1", "true", "yes", "on")


def mypyc_extensions() -> list[Extension]:
    """mypyc's extension modules for ``COMPILED_MODULES`` (type-checks them and writes their C
    into ``build/``), or ``[]`` when mypyc is missing or fails."""
    try:
        from mypyc.build import mypycify
    except ImportError:
        warn("mypyc is not installed (it ships with mypy): installing pure Python")
        return []
    paths = [str(Path(*name.split(".")).with_suffix(".py")) for name in compiled_module_names()]
    # The project's [tool.mypy] names the mypy-zope plugin, which the build environment need
    # not have: mypyc reads its own options from mypyc.ini (the sans-IO layers import no zope).
    options = ["--config-file", str(HERE / "mypyc.ini")]
    cwd = os.getcwd()
    os.chdir(HERE)
    try:
        return list(mypycify(options + paths, opt_level="3", debug_level="0",
                             group_name=GROUP))
    except BaseException:  # mypyc exits with SystemExit on a type error
        warn("mypyc could not compile the sans-IO modules; installing pure Python:\n"
             + traceback.format_exc())
        return []
    finally:
        os.chdir(cwd)


class OptionalBuildExt(build_ext):
    """build_ext that compiles ``COMPILED_MODULES`` with mypyc, or builds nothing (the
    pure-Python package) when asked to (``RSOCKET_TX_PURE=1``) or when compiling fails: all the
    compiled modules or none (each module's shim needs the shared library)."""

    def initialize_options(self) -> None:
        super().initialize_options()
        # compile the C files of mypyc's output on every core
        self.parallel = os.cpu_count() or 1

    def finalize_options(self) -> None:
        # mypyc runs here, when the build needs the C code, not whenever setup.py is read
        # (pip reads it several times: requirements, metadata)
        if pure_requested():
            warn(f"{PURE_SWITCH} is set: installing pure Python")
            extensions = []
        else:
            extensions = mypyc_extensions()
        # the placeholder stays when there is nothing to build: the distribution keeps "has
        # extension modules", so that install puts the package where the wheel's tag says
        self.distribution.ext_modules = extensions or PLACEHOLDER
        super().finalize_options()
        self.extensions = extensions

    def run(self) -> None:
        if not self.extensions:
            self.fall_back()
            return
        try:
            super().run()
        except Exception:  # any compiler or linker failure: the pure build instead
            warn("compiling the sans-IO modules failed; installing pure Python:\n"
                 + traceback.format_exc())
            for ext in self.extensions:
                built = Path(self.build_lib, *ext.name.split("."))
                for path in built.parent.glob(built.name + ".*"):
                    if path.suffix in (".so", ".pyd"):
                        path.unlink()
            self.extensions = []
            self.fall_back()

    def fall_back(self) -> None:
        """The pure build: in an editable (in-place) build, no compiled module may stay
        next to the sources."""
        if self.inplace or getattr(self, "editable_mode", False):
            remove_in_tree_builds()


#: what setup.cfg's package needs for ``build_ext`` to run at all (setuptools runs it only for a
#: distribution with extension modules); :class:`OptionalBuildExt` replaces it with mypyc's
PLACEHOLDER = [Extension(f"{GROUP}__mypyc", sources=[])]

setup(ext_modules=PLACEHOLDER, cmdclass={"build_ext": OptionalBuildExt})
