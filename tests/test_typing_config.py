"""The package is type-checked whole, and the checks are not weakened (issue 26, item 4).

``make typecheck`` runs mypy on all of ``rsocket_tx`` and ``pyspark_rsocket``
(``tests/test_contributing.py`` checks the Makefile and the pre-commit hook agree). These tests
check the rules CONTRIBUTING.rst gives for keeping it clean: no blanket ignores (a ``type:
ignore`` names its error code), no setting that hides errors for the whole package, and the
public API modules checked strictly. Running mypy itself is CI's ``make typecheck`` step.
"""

from __future__ import annotations

import re
import tomllib

from process_support import REPO

PACKAGES = ("rsocket_tx", "pyspark_rsocket")
#: a ``type: ignore`` comment, and what follows it
_IGNORE = re.compile(r"#\s*type:\s*ignore(?P<rest>.*)$")


def mypy_config() -> dict:
    with open(REPO / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["mypy"]


def test_every_type_ignore_names_its_error_codes():
    bare = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                m = _IGNORE.search(line)
                if m is not None and not re.match(r"\[[a-z-]+(, *[a-z-]+)*\]", m["rest"]):
                    bare.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not bare, "type: ignore without an error code:\n" + "\n".join(bare)


def test_the_rules_that_find_errors_are_on_for_the_whole_package():
    config = mypy_config()
    assert "mypy_zope:plugin" in config["plugins"]
    for rule in ("check_untyped_defs", "warn_unused_ignores", "warn_unused_configs",
                 "no_implicit_optional", "strict_equality"):
        assert config.get(rule) is True, rule
    # nothing that hides errors package-wide
    for setting in ("ignore_errors", "ignore_missing_imports", "follow_imports",
                    "disable_error_code", "allow_untyped_globals"):
        assert setting not in config, setting


def test_no_override_hides_errors_of_a_whole_package():
    for override in mypy_config().get("overrides", []):
        modules = override["module"]
        modules = [modules] if isinstance(modules, str) else modules
        if override.get("ignore_errors") or override.get("disable_error_code"):
            # one module at a time, named (the transitional entries of pyproject.toml)
            wildcards = [m for m in modules if m.endswith("*") or m in PACKAGES]
            assert not wildcards, f"errors hidden for whole packages: {wildcards}"
        if "ignore_missing_imports" in override:
            # only for a third-party module without type information, never one of ours
            ours = [m for m in modules if m.split(".")[0] in PACKAGES]
            assert not ours, f"imports of our own modules hidden: {ours}"


def test_the_public_api_is_checked_strictly():
    strict = set()
    for override in mypy_config().get("overrides", []):
        if override.get("disallow_untyped_defs") and override.get("disallow_any_generics") \
                and override.get("disallow_untyped_calls") and override.get("warn_return_any"):
            modules = override["module"]
            strict.update([modules] if isinstance(modules, str) else modules)
    for module in ("rsocket_tx", "rsocket_tx.client", "rsocket_tx.server", "rsocket_tx.routing",
                   "rsocket_tx.lease", "rsocket_tx.codecs", "rsocket_tx.extensions",
                   "rsocket_tx.core.errors", "rsocket_tx.core.payload", "rsocket_tx.testing",
                   "rsocket_tx.transports.endpoints", "rsocket_tx.transports.tls"):
        assert module in strict, module
    assert "rsocket_tx.mux.*" in strict and "rsocket_tx.extensions.*" in strict
