"""The mux layer: what the multiplexed protocols of rsocket_tx share, with no I/O.

RSocket 1.0, the Jini ERI multiplexing protocol and the Reactive Streams network draft all
carry many independent conversations over one transport. What they truly share lives here,
pure Python with no Twisted import (``tests/test_layers.py`` enforces it); codecs, handshakes,
stream-opening rules and error codes stay in each protocol.

==========================  ===============================================================
:mod:`.streams`             :class:`MuxStream` (per-direction half-close state) and the
                            :class:`StreamTable` of a connection (limit, removal when both
                            directions are closed)
:mod:`.ids`                 id policies: :class:`ParityIds` (RSocket), :class:`LowestFreeIds`
                            (Jini client), :class:`PeerChosenIds` (Jini server, RS-network)
:mod:`.credit`              :class:`Credit` in a :class:`CreditUnit`: items (RSocket
                            request-n, RS-network demand) or bytes (Jini rations)
:mod:`.reassembly`          :class:`Reassembler` per message, :class:`ReassemblyBudget` per
                            connection
:mod:`.outbox`              :class:`Outbox`, the queue of bytes to write
:mod:`.deadlines`           :class:`Deadlines`, timers as data (time is passed in)
:mod:`.errors`              :class:`MuxError` and its subclasses
:mod:`.sniff`               :class:`Sniff`, a protocol's verdict on a connection's first bytes
                            (the one-port server)
==========================  ===============================================================
"""

from __future__ import annotations

from .credit import MAX_CREDIT, Credit, CreditUnit
from .deadlines import Deadlines
from .errors import (
    CreditExceeded,
    CreditOverflow,
    IdsExhausted,
    MuxError,
    ReassemblyLimitExceeded,
    StreamIdInUse,
    StreamIdOutOfRange,
    StreamLimitExceeded,
)
from .ids import IdPolicy, LowestFreeIds, ParityIds, PeerChosenIds
from .outbox import Outbox
from .reassembly import Reassembler, ReassemblyBudget
from .sniff import Sniff, Sniffer
from .streams import MuxStream, StreamTable

__all__ = [
    "MAX_CREDIT",
    "Credit",
    "CreditExceeded",
    "CreditOverflow",
    "CreditUnit",
    "Deadlines",
    "IdPolicy",
    "IdsExhausted",
    "LowestFreeIds",
    "MuxError",
    "MuxStream",
    "Outbox",
    "ParityIds",
    "PeerChosenIds",
    "ReassemblyBudget",
    "ReassemblyLimitExceeded",
    "Reassembler",
    "Sniff",
    "Sniffer",
    "StreamIdInUse",
    "StreamIdOutOfRange",
    "StreamLimitExceeded",
    "StreamTable",
]
