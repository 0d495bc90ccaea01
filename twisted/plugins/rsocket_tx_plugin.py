"""twistd plugin for rsocket_tx: ``twistd -n rsocket --listen tcp:7878 --responder mod:Class``.

Lazy on purpose: plugin discovery imports this file, so it names the options and service module
(:mod:`rsocket_tx.faces.tap`) as a string and imports nothing of rsocket_tx itself. There is no
``__init__.py`` in ``twisted/plugins``: the directory joins Twisted's own plugin package.
"""

from twisted.application.service import ServiceMaker

rsocket = ServiceMaker(
    "rsocket",
    "rsocket_tx.faces.tap",
    "Serve an RSocket 1.0 responder (TCP and other Twisted endpoints; the demo responder echoes"
    " and counts)",
    "rsocket",
)
