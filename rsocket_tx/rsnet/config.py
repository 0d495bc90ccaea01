"""Settings of a Reactive Streams network connection: one validated object, units on every
field (DESIGN §2: one settings object travels)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "RSNetConfig",
    "MAX_ID",
    "MAX_LONG",
    "DEFAULT_MAX_STRING_LENGTH",
    "DEFAULT_MAX_ELEMENT_SIZE",
    "DEFAULT_MAX_PACKED_SIZE",
    "DEFAULT_MAX_REASSEMBLED_SIZE",
    "DEFAULT_REASSEMBLY_BUDGET",
    "DEFAULT_MAX_PEER_SUBSCRIPTIONS",
    "DEFAULT_MAX_EXTENSIONS",
    "DEFAULT_MAX_BUFFERED_INPUT",
    "DEFAULT_MAX_PART_SIZE",
    "DEFAULT_HELLO_TIMEOUT",
    "DEFAULT_GOODBYE_TIMEOUT",
    "DEFAULT_MAX_SEND_BUFFER_SIZE",
    "DEFAULT_DRAIN_TIMEOUT",
]

#: The largest ``Id`` (subscriber ids, element ids, extension ids): 2^32-1 (5 varint bytes).
MAX_ID = 0xFFFF_FFFF
#: The largest ``Long`` (demand) and the largest of any other varint: 2^63-1, Java's
#: ``Long.MAX_VALUE`` (Reactive Streams §3.17), 9 varint bytes.
MAX_LONG = 0x7FFF_FFFF_FFFF_FFFF

DEFAULT_MAX_STRING_LENGTH = 65_536  # bytes
DEFAULT_MAX_ELEMENT_SIZE = 1024 * 1024  # bytes
DEFAULT_MAX_PACKED_SIZE = 1024 * 1024  # bytes
DEFAULT_MAX_REASSEMBLED_SIZE = 16 * 1024 * 1024  # bytes
DEFAULT_REASSEMBLY_BUDGET = 64 * 1024 * 1024  # bytes
DEFAULT_MAX_PEER_SUBSCRIPTIONS = 1024  # subscriptions
DEFAULT_MAX_EXTENSIONS = 64  # ids
#: Overhead of a message beyond its longest variable field: a type byte, two Ids, a Long.
MESSAGE_OVERHEAD = 1 + 5 + 5 + 9
DEFAULT_MAX_BUFFERED_INPUT = DEFAULT_MAX_ELEMENT_SIZE + MESSAGE_OVERHEAD + 44  # bytes
DEFAULT_MAX_PART_SIZE = 65_536  # bytes
DEFAULT_HELLO_TIMEOUT = 30_000  # ms
DEFAULT_GOODBYE_TIMEOUT = 10_000  # ms
DEFAULT_MAX_SEND_BUFFER_SIZE = 16 * 1024 * 1024  # bytes
DEFAULT_DRAIN_TIMEOUT = 10_000  # ms

_MAX_SIZE = 2**30  # bytes: a sane ceiling for one message's field


@dataclass(slots=True, kw_only=True)
class RSNetConfig:
    """Settings of one :class:`~rsocket_tx.rsnet.connection.RSNetConnection` and of the
    Twisted layer above it. Every size, count and time the peer controls has a limit here;
    past a limit the peer has broken the protocol (*goodbye* with the reason, and close),
    except ``max_peer_subscriptions``, past which a *subscribe* is refused with
    *onSubscribe* + *onError*.

    :param extensions: the extension ids we support, announced in our hello (Reactive Streams
        network draft §Protocol negotiation); each in [0, 2^32-1], at most
        ``max_extensions`` of them. Default none.
    :param max_string_length: the longest ``String`` we accept (a publisher name, an
        *onError* text, a *goodbye* reason), in bytes of UTF-8. [1, 2^30]; default 65,536.
    :param max_element_size: the longest element we accept in one *onNext*, the longest
        ``data`` of one *onNextPart*/*onNextLastPart*, and the largest ``elementSize`` of an
        *onSubscribe*, in bytes. [1, 2^30]; default 1 MiB.
    :param max_packed_size: the most element bytes (``count * elementSize``) in one
        *onNextPacked*, in bytes. [1, 2^30]; default 1 MiB.
    :param max_reassembled_size: the longest element joined from *onNextPart* messages, in
        bytes (Reactive Streams network draft §Split messaging). [1, 2^40]; default 16 MiB.
    :param reassembly_budget: the most bytes of unfinished split elements held across every
        subscription of the connection, in bytes. [0, 2^62]; default 64 MiB.
    :param max_peer_subscriptions: how many subscriptions the peer may have open to our
        publishers at once; one more is refused (*onSubscribe* then *onError*), the
        connection stays up. [0, 2^32]; default 1,024.
    :param max_extensions: the most ids in the peer's hello ``extensions`` array. [0, 65,536];
        default 64.
    :param max_buffered_input: the most bytes of one incomplete message we hold while waiting
        for the rest of it; a message whose length fields declare more is refused as soon as
        they arrive. At least the largest message the other limits allow (see
        :attr:`largest_message`); at most 2^31. Default 1 MiB + 64.
    :param max_part_size: send side: an element longer than this (with ``elementSize`` 0) is
        split into *onNextPart* messages of at most this many bytes of data, ending with an
        *onNextLastPart*; also the most element bytes we put in one *onNextPacked*. [1, 2^30];
        default 65,536.
    :param hello_timeout: milliseconds to wait for the peer's hello after
        :meth:`~rsocket_tx.rsnet.connection.RSNetConnection.initiate_connection`; then
        *goodbye* and close. [1, 2^31-1]; default 30,000.
    :param goodbye_timeout: milliseconds to wait for the answer to our *goodbye*; then the
        connection is closed anyway. [1, 2^31-1]; default 10,000.
    :param max_send_buffer_size: Twisted layer: bytes that may wait in the transport for the
        peer to read; past it the connection is aborted. [1, 2^62]; default 16 MiB.
    :param drain_timeout: Twisted layer: on a graceful close, milliseconds open subscriptions
        get to end before *goodbye* is sent anyway. [0, 2^31-1]; default 10,000.
    :raises ValueError: a setting is out of range (naming it, its value and the range).
    """

    extensions: tuple[int, ...] = ()
    max_string_length: int = DEFAULT_MAX_STRING_LENGTH
    max_element_size: int = DEFAULT_MAX_ELEMENT_SIZE
    max_packed_size: int = DEFAULT_MAX_PACKED_SIZE
    max_reassembled_size: int = DEFAULT_MAX_REASSEMBLED_SIZE
    reassembly_budget: int = DEFAULT_REASSEMBLY_BUDGET
    max_peer_subscriptions: int = DEFAULT_MAX_PEER_SUBSCRIPTIONS
    max_extensions: int = DEFAULT_MAX_EXTENSIONS
    max_buffered_input: int = DEFAULT_MAX_BUFFERED_INPUT
    max_part_size: int = DEFAULT_MAX_PART_SIZE
    hello_timeout: int = DEFAULT_HELLO_TIMEOUT
    goodbye_timeout: int = DEFAULT_GOODBYE_TIMEOUT
    max_send_buffer_size: int = DEFAULT_MAX_SEND_BUFFER_SIZE
    drain_timeout: int = DEFAULT_DRAIN_TIMEOUT

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Check every setting.

        :raises ValueError: with the name of the setting, its value and the allowed range.
        """
        _check_range("max_string_length", self.max_string_length, 1, _MAX_SIZE, "bytes")
        _check_range("max_element_size", self.max_element_size, 1, _MAX_SIZE, "bytes")
        _check_range("max_packed_size", self.max_packed_size, 1, _MAX_SIZE, "bytes")
        _check_range("max_reassembled_size", self.max_reassembled_size, 1, 2**40, "bytes")
        _check_range("reassembly_budget", self.reassembly_budget, 0, 2**62, "bytes")
        _check_range("max_peer_subscriptions", self.max_peer_subscriptions, 0, 2**32,
                     "subscriptions")
        _check_range("max_extensions", self.max_extensions, 0, 65_536, "ids")
        _check_range("max_buffered_input", self.max_buffered_input, self.largest_message,
                     2**31, "bytes")
        _check_range("max_part_size", self.max_part_size, 1, _MAX_SIZE, "bytes")
        _check_range("hello_timeout", self.hello_timeout, 1, 2**31 - 1, "ms")
        _check_range("goodbye_timeout", self.goodbye_timeout, 1, 2**31 - 1, "ms")
        _check_range("max_send_buffer_size", self.max_send_buffer_size, 1, 2**62, "bytes")
        _check_range("drain_timeout", self.drain_timeout, 0, 2**31 - 1, "ms")
        extensions = self.extensions
        if not isinstance(extensions, tuple) or len(extensions) > self.max_extensions:
            raise ValueError(f"extensions must be a tuple of at most max_extensions "
                             f"({self.max_extensions}) ids, got {extensions!r}")
        for ext in extensions:
            _check_range("each of extensions", ext, 0, MAX_ID, "(an Id)")

    @property
    def largest_message(self) -> int:
        """The largest message, in bytes, the other limits let a peer send: the longest
        variable field (element, packed elements, string, extensions array) plus the fixed
        fields around it (:attr:`max_buffered_input` must be at least this)."""
        return max(self.max_element_size, self.max_packed_size, self.max_string_length,
                   5 * self.max_extensions) + MESSAGE_OVERHEAD + 4


def _check_range(name: str, value: object, low: int, high: int, unit: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in [{low}, {high}] {unit}, got {value!r}")
