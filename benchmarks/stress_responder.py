"""The responder of the stress benchmark's soak: the demo responder, plus exact bookkeeping.

Served by ``twistd -n rsocket --resume --responder benchmarks.stress_responder:SoakResponder``
(everything else at its default). What it does:

* request-response, request-stream, request-channel: as the demo responder (echo; the stream
  ``b"0"`` … ``b"N-1"``; the channel echoes);
* fire-and-forget: data ``b"<client>:<seq>"``, ``seq`` counting from 0 on each client. The
  responder checks that each client's messages arrive exactly once and in order (resume must
  neither lose nor repeat one), keeping three counters per client (constant memory);
* metadata-push: counted per client (metadata ``b"<client>:<seq>"``);
* request-response ``b"fnf?<client>"`` answers ``b"<received> <gaps> <duplicates> <pushes>"``
  for that client.

The counters are module-level (shared by the connections of one server process), so they
survive a resume on a new transport.
"""

from __future__ import annotations

from rsocket_tx import Payload
from rsocket_tx.apps.demo import DemoResponder

__all__ = ["SoakResponder", "FNF_QUERY"]

#: Prefix of the request-response that asks for a client's fire-and-forget counters.
FNF_QUERY = b"fnf?"

#: client -> [next expected seq, received, gaps (messages skipped), duplicates or reordered]
_FNF: dict[bytes, list[int]] = {}
#: client -> metadata-pushes received
_PUSHES: dict[bytes, int] = {}


class SoakResponder(DemoResponder):
    """The demo responder with exact fire-and-forget bookkeeping and quiet logs."""

    def accept_setup(self, setup):
        """Accept every SETUP (without the demo's log line)."""
        return None

    def request_response(self, payload: Payload) -> Payload:
        """Echo, or the counters of one client for ``b"fnf?<client>"``."""
        data = payload.data
        if data.startswith(FNF_QUERY):
            client = bytes(data[len(FNF_QUERY):])
            _, received, gaps, dups = _FNF.get(client, (0, 0, 0, 0))
            return Payload(b"%d %d %d %d" % (received, gaps, dups, _PUSHES.get(client, 0)))
        return Payload(payload.data, payload.metadata)

    def fire_and_forget(self, payload: Payload) -> None:
        """Check ``b"<client>:<seq>"`` against the next sequence number expected."""
        client, _, seq_text = bytes(payload.data).partition(b":")
        seq = int(seq_text)
        state = _FNF.setdefault(client, [0, 0, 0, 0])
        state[1] += 1
        if seq == state[0]:
            state[0] += 1
        elif seq > state[0]:
            state[2] += seq - state[0]
            state[0] = seq + 1
        else:
            state[3] += 1

    def metadata_push(self, metadata: bytes) -> None:
        """Count a metadata-push of ``b"<client>:<seq>"``."""
        client = bytes(metadata).partition(b":")[0]
        _PUSHES[client] = _PUSHES.get(client, 0) + 1
