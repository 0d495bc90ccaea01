"""A demo dispatcher: :class:`EchoDispatcher` sends every request body back as the response.

It is an application of the Jini ERI mux API, not part of the library: the faces (the twistd
plugin, the CLI) serve it by default.
"""

from __future__ import annotations

from .server import Dispatcher, InboundRequest

__all__ = ["EchoDispatcher", "ECHO_BUFFER"]

#: Bytes of response the echo lets wait for the client's ration before it reads more of the
#: body: the client's ration, not this server's memory, paces a large echo.
ECHO_BUFFER = 64 * 1024


class EchoDispatcher(Dispatcher):
    """Echo each request body, chunk by chunk as it arrives (a streaming echo: the response
    starts before the request ends, and reading pauses while the client does not take the
    response)."""

    async def dispatch(self, request: InboundRequest) -> None:
        response = request.response
        async for chunk in request.body:
            response.write(chunk)
            if response.pending > ECHO_BUFFER:
                await response.when_drained()
        response.finish()
