"""The compiled build (mypyc, ``setup.py``) and the pure-Python one behave the same.

* The build under test is the one asked for: ``RSOCKET_TX_BUILD=compiled`` (``make test``)
  fails unless every module of :data:`rsocket_tx.build.COMPILED_MODULES` was imported from an
  extension module, so CI cannot test the pure build twice; ``RSOCKET_TX_BUILD=pure`` (``make
  test-pure``) fails if any was. Without the variable the build must be whole: all or none.
* An in-place (editable) compiled build is not older than its sources (an edit not rebuilt
  would be shadowed by the old extension module).
* Wrong arguments to the public constructors and functions of the compiled modules raise the
  same exception, with the same message, in both builds: each case of :data:`CASES` runs in a
  fresh interpreter on this tree and on a pure copy of it (no extension modules), and the
  outcomes are compared.
* The compiled classes that other modules and applications subclass (the connection, the
  stream) stay subclassable, their overrides called.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import rsocket_tx
from rsocket_tx import build

ROOT = Path(__file__).resolve().parent.parent


def test_the_build_is_whole_and_the_one_asked_for() -> None:
    compiled = build.compiled_modules()
    expected = os.environ.get("RSOCKET_TX_BUILD", "")
    if expected == "compiled":
        assert compiled == list(build.COMPILED_MODULES), (
            "RSOCKET_TX_BUILD=compiled but these modules run as Python: "
            f"{sorted(set(build.COMPILED_MODULES) - set(compiled))} (did setup.py fall back?)")
    elif expected == "pure":
        assert compiled == [], f"RSOCKET_TX_BUILD=pure but these run compiled: {compiled}"
    else:
        assert compiled in ([], list(build.COMPILED_MODULES)), f"a partial build: {compiled}"
    assert build.compiled is bool(compiled) is rsocket_tx.compiled
    assert build.describe() == ("compiled: mypyc" if compiled else "pure Python")


def test_in_place_extension_modules_are_not_older_than_their_sources() -> None:
    stale = []
    for name in build.COMPILED_MODULES:
        source = ROOT.joinpath(*name.split(".")).with_suffix(".py")
        for built in source.parent.glob(source.stem + ".*"):
            if built.suffix in (".so", ".pyd") and built.stat().st_mtime < source.stat().st_mtime:
                stale.append(f"{built.name} (older than {source.name})")
    assert stale == [], f"rebuild (make venv, or pip install -e .): {stale}"


# -- subclasses ----------------------------------------------------------------------------------


def test_connection_and_stream_subclasses_work() -> None:
    from rsocket_tx.core.connection import RSocketConnection
    from rsocket_tx.mux.streams import MuxStream, StreamTable

    calls = []

    class Observed(RSocketConnection):
        def data_to_send(self) -> bytes:
            calls.append("data_to_send")
            return super().data_to_send()

    connection = Observed("server")
    assert connection.data_to_send() == b"" and calls == ["data_to_send"]

    class Tagged(MuxStream):
        __slots__ = ("tag",)

        def __init__(self, stream_id: int) -> None:
            super().__init__(stream_id)
            self.tag = "mine"

    table: StreamTable[Tagged] = StreamTable(4)
    table.add(Tagged(1), remote=True)
    assert table.get(1).tag == "mine"


# -- the same errors in both builds --------------------------------------------------------------

#: a client connection, its SETUP sent (setup statements of the cases below)
CLIENT = """
from rsocket_tx.core.connection import RSocketConnection
from rsocket_tx.core.errors import ApplicationError
from rsocket_tx.core.frames import SetupFrame
from rsocket_tx.core.lease import Lease
from rsocket_tx.core.payload import Payload
c = RSocketConnection("client", setup=SetupFrame(keepalive_interval=1000, max_lifetime=9000,
                      metadata_mime_type=b"m", data_mime_type=b"d"))
c.data_to_send()
"""

#: ``(setup, expression)``: statements run first, then the expression whose outcome (its
#: value's type, or the exception's type and message) must be the same in both builds: wrong
#: values (out of range, ``True`` as a number) of the right type, and wrong types that the code
#: checks itself
SAME: list[tuple[str, str]] = [
    # mux
    ("from rsocket_tx.mux.credit import Credit, CreditUnit", "Credit(CreditUnit.ITEMS, -1)"),
    ("from rsocket_tx.mux.credit import Credit, CreditUnit", "Credit(CreditUnit.ITEMS, 5, 4)"),
    ("from rsocket_tx.mux.credit import Credit, CreditUnit",
     "Credit(CreditUnit.ITEMS, 1).grant(-1)"),
    ("from rsocket_tx.mux.credit import Credit, CreditUnit",
     "Credit(CreditUnit.ITEMS, 1).consume(2)"),
    ("from rsocket_tx.mux.ids import ParityIds", "ParityIds(0, 10)"),
    ("from rsocket_tx.mux.ids import ParityIds", "ParityIds(1, 0)"),
    ("from rsocket_tx.mux.ids import LowestFreeIds", "LowestFreeIds(0)"),
    ("from rsocket_tx.mux.ids import LowestFreeIds", "LowestFreeIds(True)"),
    ("from rsocket_tx.mux.ids import PeerChosenIds", "PeerChosenIds(-1)"),
    ("from rsocket_tx.mux.ids import PeerChosenIds", "PeerChosenIds(5).claim(6)"),
    ("from rsocket_tx.mux.ids import PeerChosenIds", "[i := PeerChosenIds(5), i.claim(1), "
                                                     "i.claim(1)]"),
    ("from rsocket_tx.mux.ids import LowestFreeIds", "[i := LowestFreeIds(1), i.allocate(), "
                                                     "i.allocate()]"),
    ("from rsocket_tx.mux.reassembly import ReassemblyBudget", "ReassemblyBudget(-1)"),
    ("from rsocket_tx.mux.reassembly import Reassembler", "Reassembler(-1)"),
    ("from rsocket_tx.mux.reassembly import Reassembler", "Reassembler(3).append(b'four')"),
    ("from rsocket_tx.mux.streams import StreamTable", "StreamTable(-1)"),
    ("from rsocket_tx.mux.streams import StreamTable, MuxStream",
     "[t := StreamTable(1), t.add(MuxStream(1), remote=True), t.add(MuxStream(3), remote=True)]"),
    ("from rsocket_tx.mux.streams import StreamTable, MuxStream",
     "[t := StreamTable(2), t.add(MuxStream(1), remote=True), t.add(MuxStream(1), remote=True)]"),
    ("from rsocket_tx.mux.sniff import Sniff", "Sniff('maybe')"),
    # core
    ("from rsocket_tx.core.payload import Payload", "Payload(bytearray(b'd'), memoryview(b'm'))"),
    ("from rsocket_tx.core.lease import Lease", "Lease(ttl=-1, number_of_requests=1)"),
    ("from rsocket_tx.core.lease import Lease", "Lease(ttl=True, number_of_requests=1)"),
    ("from rsocket_tx.core.lease import Lease", "Lease(ttl='10', number_of_requests=1)"),
    ("from rsocket_tx.core.lease import Lease", "Lease(ttl=1, number_of_requests=2**31)"),
    ("from rsocket_tx.core.lease import Lease", "Lease(ttl=1, number_of_requests=1, "
                                                "metadata='m')"),
    ("from rsocket_tx.core.lease import FixedRateLeasePolicy", "FixedRateLeasePolicy(0, -1)"),
    ("from rsocket_tx.core.lease import FixedRateLeasePolicy",
     "FixedRateLeasePolicy(1000, 5, interval=True)"),
    ("from rsocket_tx.core.lease import ConcurrencyLeasePolicy", "ConcurrencyLeasePolicy('x')"),
    ("from rsocket_tx.core.lease import ResponderLease", "ResponderLease(grace=-1)"),
    ("from rsocket_tx.core.resume import Backoff", "Backoff(initial_delay=-1)"),
    ("from rsocket_tx.core.resume import Backoff", "Backoff(initial_delay=True)"),
    ("from rsocket_tx.core.resume import Backoff", "Backoff(initial_delay=1.5)"),
    ("from rsocket_tx.core.resume import Backoff", "Backoff(max_attempts=0)"),
    ("from rsocket_tx.core.resume import Backoff", "Backoff(jitter='x')"),
    ("from rsocket_tx.core.resume import Backoff", "Backoff(multiplier=True)"),
    ("from rsocket_tx.core.resume import ResumeBuffer", "ResumeBuffer(-1)"),
    ("from rsocket_tx.core.resume import SessionStore", "SessionStore(0)"),
    ("from rsocket_tx.core.resume import new_token", "new_token(0)"),
    ("from rsocket_tx.core.config import ConnectionConfig",
     "ConnectionConfig(keepalive_interval=0)"),
    ("from rsocket_tx.core.config import ConnectionConfig",
     "ConnectionConfig(keepalive_interval=True)"),
    ("from rsocket_tx.core.config import ConnectionConfig",
     "ConnectionConfig(keepalive_interval='1000')"),
    ("from rsocket_tx.core.config import ConnectionConfig", "ConnectionConfig(fragment_size=10)"),
    ("from rsocket_tx.core.config import ConnectionConfig",
     "ConnectionConfig(max_frame_size=2**24)"),
    ("from rsocket_tx.core.config import ConnectionConfig",
     "ConnectionConfig(data_mime_type='text/plain')"),
    ("from rsocket_tx.core.config import ConnectionConfig", "ConnectionConfig(lease=1)"),
    ("from rsocket_tx.core.config import ConnectionConfig", "ConnectionConfig(unknown=1)"),
    ("from rsocket_tx.core.connection import RSocketConnection", "RSocketConnection('peer')"),
    ("from rsocket_tx.core.connection import RSocketConnection", "RSocketConnection('client')"),
    (CLIENT, "c.request_stream(Payload(), initial_request_n=0)"),
    (CLIENT, "c.request_stream(Payload(), initial_request_n=True)"),
    (CLIENT, "c.request_channel(Payload(), initial_request_n=-1)"),
    (CLIENT, "c.request_n(1, 0)"),
    (CLIENT, "c.request_n(1, True)"),
    (CLIENT, "c.request_n(99, 5)"),
    (CLIENT, "c.cancel(99)"),
    (CLIENT, "c.send_payload(99, Payload())"),
    (CLIENT, "c.send_error(99, ApplicationError('x'))"),
    (CLIENT, "c.metadata_push(b'')"),
    (CLIENT, "c.send_lease(Lease(1, 1))"),
    (CLIENT, "c.receive_data(b'\\x00\\x00\\x06\\x00\\x00\\x00\\x00\\xfc\\x00')"),
    ("from rsocket_tx.core.framing import FrameReader", "FrameReader(0)"),
    ("from rsocket_tx.core.framing import FrameReader", "FrameReader(2**24)"),
    ("from rsocket_tx.core.framing import FrameReader", "FrameReader(100, 0)"),
    ("from rsocket_tx.core.framing import frame_with_length", "frame_with_length(b'x' * 2**24)"),
    ("from rsocket_tx.core.frames import decode", "decode(b'')"),
    ("from rsocket_tx.core.frames import decode", "decode(b'\\x00\\x00\\x00\\x00\\xff\\x00')"),
    ("from rsocket_tx.core.frames import encode, RequestNFrame",
     "encode(RequestNFrame(stream_id=1, n=0))"),
    ("from rsocket_tx.core.frames import encode, CancelFrame", "encode(CancelFrame(stream_id=-1))"),
    ("from rsocket_tx.core.frames import encode", "encode(object())"),
    ("from rsocket_tx.core.sniff import sniff", "sniff(b'')"),
]

#: arguments of a wrong type that the code does not check itself: the compiled build refuses them
#: at the call with mypyc's ``TypeError`` (``"bytes object expected; got str"``); the pure one
#: fails with ``TypeError`` or ``AttributeError`` where it first uses them (a role that is not a
#: str: ``ValueError``, as for a wrong str). Both raise.
WRONG_TYPES: list[tuple[str, str]] = [
    ("from rsocket_tx.core.payload import Payload", "Payload('text')"),
    ("from rsocket_tx.core.payload import Payload", "Payload(b'd', 'meta')"),
    ("from rsocket_tx.core.payload import Payload", "Payload(None)"),
    ("from rsocket_tx.core.connection import RSocketConnection", "RSocketConnection(1)"),
    (CLIENT, "c.request_response('x')"),
    (CLIENT, "c.fire_and_forget(b'x')"),
    (CLIENT, "c.receive_data('text')"),
    ("from rsocket_tx.mux.credit import Credit, CreditUnit", "Credit(CreditUnit.ITEMS, '1')"),
    ("from rsocket_tx.mux.ids import ParityIds", "ParityIds('1', 10)"),
]

#: runs in a fresh interpreter: argv[1] is the JSON list of cases; prints the JSON outcomes
RUNNER = """
import json, re, sys
outcomes = []
for setup, expression in json.loads(sys.argv[1]):
    scope = {}
    try:
        exec(setup, scope)
        value = eval(expression, scope)
    except Exception as exc:
        message = re.sub(r" at 0x[0-9a-f]+", "", str(exc))  # no addresses: they differ per run
        outcomes.append(f"{type(exc).__module__}.{type(exc).__qualname__}: {message}")
    else:
        outcomes.append(f"returned {type(value).__qualname__}")
print(json.dumps(outcomes))
"""


def outcomes(tree: Path, cases: list[tuple[str, str]]) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(tree)
    proc = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(cases)], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def pure_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package without its extension modules: the pure build."""
    tree = tmp_path_factory.mktemp("pure")
    shutil.copytree(ROOT / "rsocket_tx", tree / "rsocket_tx",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd"))
    return tree


def test_the_pure_copy_is_pure(pure_tree: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(pure_tree)
    proc = subprocess.run(
        [sys.executable, "-c", "from rsocket_tx import build; print(build.compiled_modules(),"
                               " build.__file__)"],
        cwd=pure_tree, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("[] " + str(pure_tree)), proc.stdout


def test_wrong_arguments_raise_the_same_errors_in_both_builds(pure_tree: Path) -> None:
    pure = outcomes(pure_tree, SAME)
    this = outcomes(ROOT, SAME)
    differ = [f"{setup}; {expression}\n  pure:     {p}\n  this one: {t}"
              for (setup, expression), p, t in zip(SAME, pure, this) if p != t]
    assert differ == [], f"{build.describe()} differs from pure Python:\n" + "\n".join(differ)
    # the cases do test wrong arguments: nearly all of them raise (the others are edge values
    # that are accepted, such as True as a request-n of 1, and must be accepted by both)
    assert sum(o.startswith("returned") for o in pure) <= 10, pure


def test_arguments_of_a_wrong_type_raise_in_both_builds(pure_tree: Path) -> None:
    for build_outcomes in (outcomes(pure_tree, WRONG_TYPES), outcomes(ROOT, WRONG_TYPES)):
        for (_, expression), outcome in zip(WRONG_TYPES, build_outcomes):
            assert outcome.startswith(("builtins.TypeError", "builtins.AttributeError",
                                       "builtins.ValueError")), (
                expression, outcome)
