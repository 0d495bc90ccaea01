"""Every input in the fuzz seed corpus (``fuzz/corpus/<target>``) and every crash input the
fuzzer found (``fuzz/regressions/<target>``) runs through its target without atheris: the
targets stay runnable, the seeds stay valid inputs, and a fixed crash stays fixed. The oracle
is the target's own ``one_input`` (only documented errors are expected; see ``fuzz/``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fuzz import targets

FUZZ = Path(__file__).resolve().parent.parent.parent / "fuzz"


def inputs(name: str) -> list[Path]:
    found = []
    for kind in ("corpus", "regressions"):
        directory = FUZZ / kind / name
        if directory.is_dir():
            found += sorted(p for p in directory.iterdir() if p.is_file())
    return found


def test_every_target_has_seeds() -> None:
    assert targets.names()
    for name in targets.names():
        assert (FUZZ / "corpus" / name).is_dir() and any((FUZZ / "corpus" / name).iterdir()), \
            f"no seeds for {name}: run python -m fuzz.make_corpus"


@pytest.mark.parametrize("name", targets.names())
def test_replay(name: str) -> None:
    one_input = targets.load(name).one_input
    for path in inputs(name):
        try:
            one_input(path.read_bytes())
        except Exception as exc:
            raise AssertionError(f"{name}: {path.relative_to(FUZZ)} crashes: "
                                 f"{type(exc).__name__}: {exc}") from exc
