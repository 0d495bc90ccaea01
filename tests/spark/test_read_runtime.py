"""pyspark_rsocket._runtime: the reactor thread, cached connections, chunked streams with
withheld REQUEST_N, and the channel helper. Run in a subprocess (as in a Spark worker: no
reactor in its main thread) against the session's StreamLog server."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from spark_support import publish

SCRIPT = textwrap.dedent(r'''
    import json, sys, time
    from pyspark_rsocket import _runtime as rt
    from rsocket_tx import InvalidError
    from rsocket_tx.apps.streamlog import offset_of

    ep, topic = sys.argv[1], sys.argv[2]

    # one reactor, one cached connection per endpoint; a closed one is replaced
    r1 = rt.reactor()
    assert rt.reactor() is r1
    c1 = rt.get_connection(ep)
    assert rt.get_connection(ep) is c1
    rt._call(lambda: c1.close(0))
    c2 = rt.get_connection(ep)
    assert c2 is not c1 and c2.is_open
    print("REUSE ok")

    # request-response
    answer = json.loads(rt.request_response(ep, {"topic": topic}, route="log.offsets").data)
    assert answer == {"topic": topic, "shards": {"0": 5000}}, answer

    # chunks, and REQUEST_N withheld while the consumer does not take them
    s = rt.request_stream_chunks(ep, {"topic": topic, "shard": 0, "from": 0}, route="log.read",
                                 prefetch=100, chunk_size=50, max_chunks=2)
    first = next(s)
    assert [offset_of(p.metadata) for p in first] == list(range(len(first)))
    assert 1 <= len(first) <= 50
    deadline = time.monotonic() + 30
    def state():
        stream = s._stream
        moved = s.items + sum(len(c) for c in s._chunks if c is not rt._END)
        # credit not yet re-granted: consumed items below the REQUEST_N threshold
        return moved, len(stream._queue), stream._consumed, len(s._chunks)
    # wait (for the server process) until the client holds everything credited so far:
    # then the chunk queue is full (2 chunks) and the stream buffers a full window
    while True:
        moved, queued, pending, chunks = rt._call(state)
        if chunks == 2 and queued + pending == 100:
            break
        assert time.monotonic() < deadline, (moved, queued, pending, chunks)
        time.sleep(0.05)
    received = moved + queued
    assert moved <= len(first) + 2 * 50 and received <= len(first) + 200, (moved, queued)
    rest = [p for chunk in s for p in chunk]
    offsets = [offset_of(p.metadata) for p in first + rest]
    assert offsets == list(range(5000)), offsets[:5]
    print("BACKPRESSURE ok", received)

    # a responder error reaches the consumer
    try:
        list(rt.request_stream_chunks(ep, {"topic": topic, "shard": 0, "from": 9999},
                                      route="log.read"))
    except InvalidError as e:
        print("ERROR ok", e)

    # request-channel with acks: records fed in chunks, sent as the responder grants credit
    acks = []
    sent = rt.send_records(ep, "log.append", {"topic": topic + "-out", "shard": 0},
                           ([b"r%d" % j for j in range(i, i + 250)] for i in range(0, 3000, 250)),
                           "acked", 60, acks.append)
    assert sent == 3000 and acks[-1] == 3000, acks
    print("CHANNEL ok", len(acks))
    rt.close_all()
''')


def test_runtime_in_a_worker_like_process(log_server):
    topic = "runtime"
    publish(log_server.dbs[0], topic, [b"%d" % i for i in range(5000)])
    proc = subprocess.run([sys.executable, "-c", SCRIPT, log_server.endpoint, topic],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "REUSE ok"
    assert lines[1].startswith("BACKPRESSURE ok")
    assert lines[2].startswith("ERROR ok INVALID")
    assert lines[3] == "CHANNEL ok 3"  # ack_every 1024: 1024, 2048, 3000
    from rsocket_tx.apps.streamlog import StreamLog
    log = StreamLog(log_server.dbs[0])
    try:
        assert [d for _, d in log.read(topic + "-out", 0)] == [b"r%d" % j for j in range(3000)]
    finally:
        log.close()
