"""A demo dispatcher: :class:`EchoDispatcher` sends every request body back as the response.

It is an application of the Jini ERI mux API, not part of the library: the faces (the twistd
plugin, the CLI) serve it by default.
"""

from __future__ import annotations

from .server import Dispatcher, InboundRequest, ResponseWriter

__all__ = ["EchoDispatcher", "ECHO_MAX_BUFFERED"]

#: The most response bytes, across all the sessions of one connection, that the echo holds
#: while they wait for the client's ration: 16 MiB. Past it the session that would hold more
#: is aborted (:class:`EchoDispatcher`).
ECHO_MAX_BUFFERED = 16 * 1024 * 1024


class EchoDispatcher(Dispatcher):
    """Echo each request body, chunk by chunk as it arrives (a streaming echo: the response
    starts before the request ends).

    The echo never stops reading while the client is still writing. A client may write its
    whole request before it reads the response and grant no ration for the response until
    then: Apache River's ``TcpEndpoint`` client does exactly that. An echo that stopped
    reading once the client's ration was spent would stop granting the client ration for the
    request too, and both would wait for ever (Jini ERI Multiplexing Protocol §Flow Control).
    So what the client's ration does not let through waits in the response writer, and that
    is bounded: at most ``max_buffered`` bytes across the sessions of one connection (one
    dispatcher serves one connection). A session whose response would leave more waiting is
    aborted (*Abort* with the partial flag, §Abort Message) with a detail that says so, and
    the memory is freed. A write-then-read client can thus be echoed a body of up to
    ``max_buffered`` bytes plus the ration it announced (River's: 32,768 bytes); a client
    that reads its response while it writes is echoed any size, a ration at a time.

    :param max_buffered: the bound, in bytes, at least 1; default
        :data:`ECHO_MAX_BUFFERED` (16 MiB). A server's memory for echoes is at most this per
        connection (times ``ConnectionLimit``'s cap of connections).
    :raises ValueError: ``max_buffered`` is not an int of at least 1.
    """

    def __init__(self, max_buffered: int = ECHO_MAX_BUFFERED) -> None:
        if isinstance(max_buffered, bool) or not isinstance(max_buffered, int) \
                or max_buffered < 1:
            raise ValueError(f"max_buffered must be an int of at least 1 byte, got "
                             f"{max_buffered!r}")
        self.max_buffered = max_buffered
        self._responses: set[ResponseWriter] = set()

    @property
    def buffered(self) -> int:
        """Response bytes of this connection's echoes waiting for the client's ration."""
        return sum(response.pending for response in self._responses)

    async def dispatch(self, request: InboundRequest) -> None:
        response = request.response
        self._responses.add(response)
        try:
            async for chunk in request.body:
                response.write(chunk)
                waiting = self.buffered
                if waiting > self.max_buffered:
                    request.abort(True, (
                        f"echo: {waiting} bytes of response wait for the client's ration, "
                        f"more than this server holds per connection ({self.max_buffered}, "
                        "max_buffered); read the response while writing the request, or "
                        "send a smaller body"))
                    return
            response.finish()
        finally:
            self._responses.discard(response)
