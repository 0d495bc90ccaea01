"""The package is typed for its users (PEP 561): mypy, run on a user's script outside the
checkout, reads rsocket_tx's own annotations (``py.typed``), accepts correct use of the public
API and reports misuse.

If ``py.typed`` went missing, mypy would refuse to analyse the installed package
(``import-untyped``) and the correct script would fail; if ``connect()`` lost its
``Deferred[RSocket]`` return type, the misuse would go unreported.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import rsocket_tx

#: a user's script: serve a Responder, connect, request (checked with --strict)
GOOD = '''\
from __future__ import annotations

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IListeningPort

from rsocket_tx import Payload, Responder, RSocket, RequestStream, connect, serve
from rsocket_tx.testing import connected_pair


class Echo(Responder):
    def request_response(self, payload: Payload) -> Payload:
        return payload


async def main() -> None:
    listening: Deferred[IListeningPort] = serve("tcp:7878:interface=127.0.0.1", Echo)
    await listening
    connected: Deferred[RSocket] = connect("tcp:host=127.0.0.1:port=7878")
    rsocket = await connected
    response: Payload | None = await rsocket.request_response(Payload(b"hi"))
    print(response)
    await rsocket.fire_and_forget(Payload(b"note"))
    await rsocket.metadata_push(b"pushed")
    stream = rsocket.request_stream(Payload(b"5"), prefetch=8)
    assert isinstance(stream, RequestStream)
    done: Deferred[None] = rsocket.close(drain_timeout=0)
    await done


def test_echo() -> None:
    pair = connected_pair(Echo)
    items: list[Payload] = pair.result(pair.client.request_stream(Payload(b"")).collect())
    assert items == []
'''

#: the same API misused: each line marked ``# error`` must be reported
BAD = '''\
from twisted.internet.defer import Deferred

from rsocket_tx import Payload, Responder, connect
from rsocket_tx.testing import connected_pair


class Wrong(Responder):
    def request_response(self, payload: int) -> Payload:  # error: [override]
        return Payload(b"")


d: Deferred[int] = connect("tcp:host=127.0.0.1:port=7878")  # error: [assignment]


async def use() -> None:
    rsocket = await connect("tcp:host=127.0.0.1:port=7878")
    rsocket.metadata_push("not bytes")  # error: [arg-type]
    rsocket.request_respons(Payload(b""))  # error: [attr-defined]


pair = connected_pair(Wrong, clock=5)  # error: [arg-type]
'''


def mypy(directory: Path, *files: str) -> str:
    """Run mypy (this environment's, where rsocket_tx is installed) on ``files`` in
    ``directory``, outside the checkout and with no configuration file; its output."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--config-file", os.devnull,
         "--cache-dir", str(directory / ".mypy_cache"), "--no-error-summary",
         "--hide-error-context", *files],
        cwd=directory, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode in (0, 1), result.stdout + result.stderr  # 2: mypy itself failed
    return result.stdout


def test_mypy_checks_user_code_against_the_packages_annotations(tmp_path: Path):
    assert not Path(rsocket_tx.__file__).resolve().is_relative_to(tmp_path)
    (tmp_path / "good.py").write_text(GOOD)
    (tmp_path / "bad.py").write_text(BAD)

    output = mypy(tmp_path, "good.py", "bad.py")

    errors = [line for line in output.splitlines() if ": error:" in line]
    assert "import-untyped" not in output and "import-not-found" not in output, output
    assert [line for line in errors if line.startswith("good.py")] == [], output
    expected = {(number, code) for number, line in enumerate(BAD.splitlines(), 1)
                for code in re.findall(r"# error: \[([a-z-]+)\]", line)}
    found = {(int(m[1]), m[2]) for m in re.finditer(r"^bad\.py:(\d+): error: .*\[([a-z-]+)\]$",
                                                     output, re.M)}
    assert expected and found == expected, output
    assert 'has type "Deferred[RSocket]"' in output, output
