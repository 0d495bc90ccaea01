"""An RSocket server inside a twistd application, the way any Twisted server is embedded.

Run it with ``twistd -ny hello.tac`` (add ``-l server.log`` for a log file, leave out ``-n``
to daemonize). ``HELLO_LISTEN`` overrides the endpoint, e.g. ``HELLO_LISTEN=unix:/tmp/hello.sock``.
Try it: ``rsocket-tx request tcp://127.0.0.1:7878 -d world``.
"""

import os

from twisted.application import service, strports

from rsocket_tx import Payload, Responder, RSocketServerFactory


class Hello(Responder):
    def request_response(self, payload):
        return Payload(b"hello " + payload.data)


class CloseConnections(service.Service):
    """On shutdown, close the open connections gracefully (ERROR[CONNECTION_CLOSE] after the
    open streams finish, ``drain_timeout`` ms at most); twistd waits for the Deferred."""

    def __init__(self, factory):
        self.factory = factory

    def stopService(self):
        super().stopService()
        return self.factory.close_connections()


# a Twisted endpoint string: tcp, unix, ssl, and the package's mtls, ws and wss plugins
LISTEN = os.environ.get("HELLO_LISTEN", "tcp:7878:interface=127.0.0.1")

application = service.Application("hello")
factory = RSocketServerFactory(Hello)  # one factory: settings as in serve(), e.g. max_connections
# services stop in reverse order: the listening port first, then the connections
CloseConnections(factory).setServiceParent(application)
strports.service(LISTEN, factory).setServiceParent(application)
