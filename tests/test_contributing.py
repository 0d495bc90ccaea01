"""The contributor's guide and the git hooks say what the Makefile does.

* ``.pre-commit-config.yaml`` runs, hook for hook, the commands of ``make lint`` and ``make
  typecheck`` (so a commit the hooks accept passes those CI steps), with the tools of ``.venv``
  and nothing to download;
* every ``make`` target ``CONTRIBUTING.rst`` names exists, every repository path it names
  exists, and it documents every pytest marker ``pyproject.toml`` registers;
* ``README.rst`` links the guide.
"""

from __future__ import annotations

import re
import shlex

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest's own dependency
    import tomli as tomllib
import yaml
from process_support import REPO

GUIDE = REPO / "CONTRIBUTING.rst"

_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*(?::=|\?=|=)\s*(.*)$")
_RULE = re.compile(r"^([A-Za-z0-9_.%/$()-]+(?:\s+[A-Za-z0-9_.%/$()-]+)*)\s*:(?!=)")
_REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def makefile() -> tuple[dict[str, str], dict[str, list[str]]]:
    """The Makefile's variables (name to unexpanded value) and its rules (target to recipe
    lines), with backslash continuations joined and comments dropped."""
    text = (REPO / "Makefile").read_text()
    lines = re.sub(r"\\\n", " ", text).splitlines()
    variables: dict[str, str] = {}
    rules: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        if line.startswith("\t"):
            if current is not None:
                current.append(line.strip())
            continue
        current = None
        line = line.split("#", 1)[0].rstrip()
        if not line:
            continue
        assignment = _ASSIGNMENT.match(line)
        if assignment:
            variables[assignment.group(1)] = " ".join(assignment.group(2).split())
            continue
        rule = _RULE.match(line)
        if rule:
            current = []
            for target in rule.group(1).split():
                rules[target] = current
    return variables, rules


def expand(text: str, variables: dict[str, str]) -> str:
    """``text`` with every ``$(NAME)`` replaced by its value, recursively."""
    for _ in range(20):
        expanded = _REFERENCE.sub(lambda m: variables[m.group(1)], text)
        if expanded == text:
            return expanded
        text = expanded
    raise AssertionError(f"Makefile variables expand without end in {text!r}")


def make_command(target: str) -> list[str]:
    """The one command of ``make TARGET``'s recipe, expanded and split into words."""
    variables, rules = makefile()
    assert target in rules, f"the Makefile has no target {target}"
    recipe = rules[target]
    assert len(recipe) == 1, f"make {target} runs {recipe}: one command expected"
    return shlex.split(expand(recipe[0], variables))


def hooks() -> dict[str, dict]:
    """The hooks of ``.pre-commit-config.yaml`` by id."""
    config = yaml.safe_load((REPO / ".pre-commit-config.yaml").read_text())
    return {hook["id"]: dict(hook, repo=repo["repo"])
            for repo in config["repos"] for hook in repo["hooks"]}


def hook_command(hook: dict) -> list[str]:
    return shlex.split(hook["entry"]) + [str(arg) for arg in hook.get("args", [])]


def test_makefile_parser_reads_the_typecheck_paths():
    variables, rules = makefile()
    paths = expand("$(TYPECHECK_PATHS)", variables).split()
    # the whole of both packages (issue 26: type-checked everywhere)
    assert paths == ["rsocket_tx", "pyspark_rsocket"]
    assert {"venv", "peers", "lint", "typecheck", "test", "fuzz", "docs"} <= set(rules)


def test_the_hooks_run_the_commands_of_make_lint_and_make_typecheck():
    found = hooks()
    assert set(found) == {"ruff", "mypy"}
    assert hook_command(found["ruff"]) == make_command("lint")
    assert hook_command(found["mypy"]) == make_command("typecheck")


def test_the_hooks_need_no_download_and_check_the_whole_tree():
    for hook in hooks().values():
        # local hooks with the tools of .venv: nothing to fetch, the versions make runs
        assert hook["repo"] == "local", hook
        assert hook["language"] == "system", hook
        assert hook["entry"].startswith(".venv/bin/"), hook
        # the Makefile's commands take no file names: the hooks must not append any
        assert hook["pass_filenames"] is False, hook


def guide() -> str:
    assert GUIDE.is_file(), "CONTRIBUTING.rst is missing"
    return GUIDE.read_text()


def test_every_make_target_the_guide_names_exists():
    _, rules = makefile()
    named = set(re.findall(r"``make\s+([a-z][a-z-]*)", guide()))
    assert {"venv", "peers", "lint", "typecheck", "fuzz"} <= named
    assert named <= set(rules), f"not Makefile targets: {sorted(named - set(rules))}"


#: the placeholders the guide writes in paths (tests/interop/peers/NAME/install.sh)
PLACEHOLDERS = re.compile(r"(?<![A-Za-z])(NAME|TARGET)(?![A-Za-z])")
#: files the guide announces as planned; once one exists the guide must say so (none now:
#: docs/framework.rst, the last, came with yamux)
PLANNED: set[str] = set()


def named_paths(text: str) -> set[str]:
    """The repository paths among the ``literals`` of ``text``, placeholders turned into
    ``*``: a file name with an extension (at the root), or a path whose first folder is one of
    the repository's (``tests/...``, not ``n/a`` or the ``tx/raw`` column, nor the
    git-ignored ``.venv/`` and ``build/``)."""
    top = {p.name for p in REPO.iterdir()} - {".venv", "build", ".git"}
    paths = set()
    for literal in re.findall(r"``([\w.*/-]+)``", text):
        path = literal.rstrip("/")
        if "/" in path and path.split("/")[0] in top \
                or "/" not in path and re.search(r"\w\.(rst|md|toml|cfg|yaml|py|sh)$", path):
            paths.add(PLACEHOLDERS.sub("*", path))
    return paths


def test_every_repository_path_the_guide_names_exists():
    paths = named_paths(guide())
    assert {"tests/conftest.py", "fuzz/targets", "benchmarks/run.py",
            "tests/interop/peers/*/install.sh"} <= paths
    missing = sorted(p for p in paths - PLANNED if not any(REPO.glob(p)))
    assert not missing, f"CONTRIBUTING.rst names paths that do not exist: {missing}"
    for planned in PLANNED:
        assert planned in paths and not (REPO / planned).exists(), \
            f"{planned} exists now: CONTRIBUTING.rst should point to it, not call it planned"


def test_the_guide_documents_every_pytest_marker():
    # the markers pyproject.toml registers (--strict-markers refuses any other)
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    markers = {m.split(":")[0].split("(")[0]
               for m in config["tool"]["pytest"]["ini_options"]["markers"]}
    assert {"interop", "logs_failure"} <= markers
    text = guide()
    undocumented = sorted(m for m in markers if f"``{m}" not in text)
    assert not undocumented, f"CONTRIBUTING.rst does not explain the markers {undocumented}"


def test_the_readme_links_the_guide():
    assert "CONTRIBUTING.rst" in (REPO / "README.rst").read_text()
