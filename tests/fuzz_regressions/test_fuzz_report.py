"""``python -m fuzz.run --report`` sums the whole-conversation targets apart from the codec
targets, per protocol, and docs/reliability.rst gives both sums: the codecs run a hundred
times more inputs a second, and one total would hide how little the connections got."""

from __future__ import annotations

import json
import re
from pathlib import Path

from fuzz import run, targets

ROOT = Path(__file__).resolve().parent.parent.parent


def test_every_target_declares_its_kind() -> None:
    kinds = {name: targets.kind(name) for name in targets.names()}
    assert set(kinds.values()) == set(targets.KINDS)
    for name, kind in kinds.items():
        # the connection targets are named after the side they play
        assert (kind == "conversation") == name.endswith(("_client", "_server")), name


def test_report_sums_each_kind_apart(tmp_path, capsys) -> None:
    runs = [("rsocket_frames", 1000, 1.0), ("rsocket_server", 7, 1.0),
            ("rsocket_client", 5, 2.0), ("rsocket_frames", 500, 1.0)]
    with open(tmp_path / "stats.jsonl", "w") as f:
        for target, inputs, seconds in runs:  # as run_target records them (older: no kind)
            f.write(json.dumps({"target": target, "protocol": "rsocket", "inputs": inputs,
                                "seconds": seconds, "crashes": [], "time": 0}) + "\n")
    assert run.main(["--report", "--workdir", str(tmp_path), "--rst"]) == 0
    out = capsys.readouterr().out
    assert "   * - **total**\n     - rsocket\n     - codec\n     - **1,500**" in out
    assert "   * - **total**\n     - rsocket\n     - conversation\n     - **12**" in out


def test_reliability_page_gives_conversation_and_codec_totals() -> None:
    text = (ROOT / "docs" / "reliability.rst").read_text()
    totals = re.findall(r"\* - \*\*total\*\*\n\s+- (\w+)\n\s+- (\w+)\n\s+- \*\*([\d,]+)\*\*", text)
    protocols = {t.PROTOCOL for t in map(targets.load, targets.names())}
    assert {(p, k) for p, k, _ in totals} == {(p, k) for p in protocols for k in targets.KINDS}
