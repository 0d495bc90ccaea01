"""What every protocol's sniffer (``rsocket_tx.mux.sniff``: the one-port server's first-bytes
test) must do, for the sniff tests of each protocol."""

from __future__ import annotations

from collections.abc import Callable

from rsocket_tx.mux.sniff import Sniff


def assert_monotonic(sniff: Callable[[bytes], Sniff], data: bytes) -> list[Sniff]:
    """Assert that ``sniff`` gives a verdict for every prefix of ``data`` (no exception),
    NEED_MORE for no bytes, and that once decided, more bytes never change the verdict.

    :returns: the verdicts, for the prefixes of 0 .. ``len(data)`` bytes.
    """
    verdicts = [sniff(data[:n]) for n in range(len(data) + 1)]
    assert verdicts[0] is Sniff.NEED_MORE
    for before, after in zip(verdicts, verdicts[1:]):
        if before is not Sniff.NEED_MORE:
            assert after is before
    return verdicts
