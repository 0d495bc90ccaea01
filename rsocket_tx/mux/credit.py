"""Credit: how much one side may still send on a stream, in items or in bytes.

=================================  =========  ============================================
Protocol                           Unit       Rules
=================================  =========  ============================================
RSocket 1.0 (§Flow Control)        items      request-n is cumulative and saturates at
                                              2^31-1 (:meth:`Credit.grant_saturating`);
                                              one PAYLOAD uses one.
Reactive Streams network draft     items      request(demand) adds demand, onNext uses
                                              one.
Jini ERI multiplexing protocol     bytes      the ration: the connection header's initial
                                              ration (0 = unlimited), IncrementRation adds
                                              to it, Data uses its length; a Data past the
                                              ration (:class:`CreditExceeded`) and a ration
                                              overflow (:class:`CreditOverflow`) are
                                              protocol violations.
=================================  =========  ============================================
"""

from __future__ import annotations

from enum import Enum

from .errors import CreditExceeded, CreditOverflow

__all__ = ["CreditUnit", "Credit", "MAX_CREDIT"]

#: The default maximum: 2^31-1, the largest request-n (RSocket) and the largest ration a Java
#: ``int`` holds (the Jini mux's River implementation).
MAX_CREDIT = 0x7FFFFFFF


class CreditUnit(Enum):
    """What a credit counts."""

    #: messages (RSocket PAYLOADs, RS-network onNext elements)
    ITEMS = "items"
    #: bytes of data (Jini ERI mux rations)
    BYTES = "bytes"


class Credit:
    """One direction's credit on one stream.

    :param unit: what it counts (:class:`CreditUnit`).
    :param initial: the credit at the start, in ``unit``; at least 0.
    :param maximum: the largest credit, in ``unit`` (default 2^31-1).
    :param unlimited: no limit at all (the Jini mux's initial ration 0): consuming never
        fails, grants change nothing.
    :raises ValueError: ``initial`` outside ``[0, maximum]``.
    """

    __slots__ = ("unit", "available", "maximum", "unlimited")

    def __init__(self, unit: CreditUnit, initial: int = 0, maximum: int = MAX_CREDIT, *,
                 unlimited: bool = False) -> None:
        if not 0 <= initial <= maximum:
            raise ValueError(f"initial credit must be in [0, {maximum}] {unit.value}, "
                             f"got {initial}")
        self.unit = unit
        #: what may still be sent, in :attr:`unit` (meaningless when :attr:`unlimited`)
        self.available = initial
        self.maximum = maximum
        self.unlimited = unlimited

    def __repr__(self) -> str:
        amount = "unlimited" if self.unlimited else f"{self.available}/{self.maximum}"
        return f"<Credit {amount} {self.unit.value}>"

    def grant(self, n: int) -> None:
        """Add ``n`` (a Jini IncrementRation, an RS-network request).

        :param n: the amount, in :attr:`unit`; at least 0.
        :raises ValueError: ``n`` < 0.
        :raises CreditOverflow: the credit would pass :attr:`maximum` (the credit is
            unchanged).
        """
        if n < 0:
            raise ValueError(f"a grant must be at least 0 {self.unit.value}, got {n}")
        if self.unlimited:
            return
        total = self.available + n
        if total > self.maximum:
            raise CreditOverflow(n, self.available, self.maximum, self.unit.value)
        self.available = total

    def grant_saturating(self, n: int) -> None:
        """Add ``n``, stopping at :attr:`maximum` (RSocket §Flow Control: request-n is
        cumulative; 2^31-1 means unbounded).

        :param n: the amount, in :attr:`unit`; at least 0.
        :raises ValueError: ``n`` < 0.
        """
        if n < 0:
            raise ValueError(f"a grant must be at least 0 {self.unit.value}, got {n}")
        total = self.available + n
        self.available = self.maximum if total > self.maximum else total

    def consume(self, n: int) -> None:
        """Use ``n`` (one PAYLOAD; a Data's length).

        :param n: the amount, in :attr:`unit`; at least 0.
        :raises CreditExceeded: ``n`` > :attr:`available` (the credit is unchanged).
        """
        if self.unlimited:
            return
        available = self.available
        if n > available:
            raise CreditExceeded(n, available, self.unit.value)
        self.available = available - n

    def take(self, n: int) -> int:
        """Use as much of ``n`` as the credit allows (how many bytes of a Data to send now).

        :param n: the amount wanted, in :attr:`unit`; at least 0.
        :returns: ``min(n, available)`` (``n`` when unlimited), now consumed.
        """
        if self.unlimited:
            return n
        got = n if n < self.available else self.available
        self.available -= got
        return got
