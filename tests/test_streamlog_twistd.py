"""StreamLogResponder served by ``twistd rsocket --responder-arg path=...`` in a separate
process, as a deployment runs it: the records survive a restart of the server."""

from __future__ import annotations

import os
import re
import sys

import pytest_twisted
from test_tap import REPO, TWISTD, _Process
from twisted.internet.defer import ensureDeferred

from rsocket_tx import InvalidError, Payload, connect
from rsocket_tx.apps.streamlog import (
    ROUTE_APPEND,
    ROUTE_OFFSETS,
    ROUTE_READ,
    StreamLog,
    StreamLogResponder,
    offset_of,
)
from rsocket_tx.extensions import COMPOSITE_METADATA
from rsocket_tx.faces.main import parse_args

aio = pytest_twisted.ensureDeferred
RESPONDER = "rsocket_tx.apps.streamlog:StreamLogResponder"


async def _twistd(*args: str) -> tuple[_Process, int]:
    """Start ``twistd -n rsocket`` with a StreamLogResponder; wait until it listens."""
    from twisted.internet import reactor

    process = _Process(re.compile(rb"listening on 127\.0\.0\.1:(\d+)"))
    argv = [sys.executable, "-c", TWISTD, "-n", "--pidfile=", "rsocket", "--listen",
            "tcp:0:interface=127.0.0.1", "--responder", RESPONDER, *args]
    reactor.spawnProcess(process, sys.executable, argv,
                         env=dict(os.environ, PYTHONUNBUFFERED="1"), path=str(REPO))
    try:
        match = await process.matched.addTimeout(60, reactor)
    except BaseException:
        await _stop(process)
        raise
    return process, int(match.group(1))


async def _stop(process: _Process) -> None:

    await process.stop()


async def _client(port: int):
    from twisted.internet import reactor

    return await connect(f"tcp://127.0.0.1:{port}", reactor=reactor,
                         metadata_mime_type=COMPOSITE_METADATA,
                         data_mime_type="application/json")


@aio
async def test_twistd_serves_a_durable_log(tmp_path):
    from twisted.internet import reactor

    path = str(tmp_path / "served.db")
    process, port = await _twistd("--responder-arg", f"path={path}", "--responder-arg",
                                  "ack_every=2")
    try:
        rs = await _client(port)
        acks = await rs.request_channel({"topic": "t", "shard": 0},
                                        [Payload(b"r%d" % i) for i in range(5)],
                                        route=ROUTE_APPEND, decode=True).collect()
        assert acks == [{"acked": 2}, {"acked": 4}, {"acked": 5}]  # ack_every=2 applied
        await rs.close()
    finally:
        await _stop(process)
    # the file is a StreamLog an application can open too
    log = StreamLog(path)
    try:
        assert log.end_offsets("t") == {0: 5}
    finally:
        log.close()

    process, port = await _twistd("--responder-arg", f"path={path}")
    try:
        rs = await _client(port)
        assert await rs.request_response({"topic": "t"}, route=ROUTE_OFFSETS, decode=True) \
            == {"topic": "t", "shards": {"0": 5}}
        got = await rs.request_stream({"topic": "t", "shard": 0, "from": 1}, route=ROUTE_READ
                                      ).collect()
        assert [(offset_of(p.metadata), p.data) for p in got] == \
            [(i, b"r%d" % i) for i in range(1, 5)]
        try:
            await rs.request_stream({"topic": "t", "shard": 0, "from": 6},
                                    route=ROUTE_READ).collect()
        except InvalidError as e:
            assert "beyond the end" in str(e)
        else:
            raise AssertionError("a read beyond the end succeeded")
        await ensureDeferred(rs.close().addTimeout(30, reactor))
    finally:
        await _stop(process)


@aio
async def test_twistd_refuses_a_path_it_cannot_open(tmp_path):
    from twisted.internet import reactor

    bad = str(tmp_path / "missing-dir" / "log.db")
    process = _Process(re.compile(rb"--responder-arg: .*StreamLogResponder rejected path="))
    argv = [sys.executable, "-c", TWISTD, "-n", "rsocket", "--responder", RESPONDER,
            "--responder-arg", f"path={bad}"]
    reactor.spawnProcess(process, sys.executable, argv, env=dict(os.environ), path=str(REPO))
    await process.matched.addTimeout(60, reactor)
    reason = await process.ended.addTimeout(60, reactor)
    assert reason.exitCode != 0
    assert b"cannot open the stream log" in process.output


def test_rsocket_tx_serve_takes_responder_args(tmp_path):
    path = str(tmp_path / "cli.db")
    settings = parse_args(["serve", "--responder", RESPONDER, "--responder-arg",
                           f"path={path}", "--responder-arg", "ack_every=7"]).settings
    assert settings.responder_args == (("path", path), ("ack_every", "7"))
    responder = settings.make_responder_factory()()
    assert isinstance(responder, StreamLogResponder) and responder.ack_every == 7
    assert responder.stream_log is StreamLog.shared(path)
    responder.stream_log.close()
