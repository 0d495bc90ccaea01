"""The responder the browser page test serves: the demo responder, plus one log line per request
it receives, so the test can check that the server (not the page) produced what the page shows.

Run by ``twistd rsocket --responder browser_responder:RecordingDemoResponder`` with this folder on
``PYTHONPATH``. Each request-response and request-stream logs (twisted.logger, level info)::

    browser-test saw request-response data='...'
    browser-test saw request-stream data='...'

``data`` is the request's data decoded as UTF-8 (invalid bytes replaced), shown with ``repr``.
"""

from __future__ import annotations

from rsocket_tx.apps.demo import DemoResponder

__all__ = ["RecordingDemoResponder", "SAW_PREFIX"]

#: What every recorded line starts with.
SAW_PREFIX = "browser-test saw"


class RecordingDemoResponder(DemoResponder):
    """:class:`rsocket_tx.apps.demo.DemoResponder` that logs every request-response and
    request-stream it receives before answering it."""

    def request_response(self, payload):
        """Log the request, then echo it (see DemoResponder)."""
        self._saw("request-response", payload.data)
        return super().request_response(payload)

    def request_stream(self, payload):
        """Log the request, then count (see DemoResponder)."""
        self._saw("request-stream", payload.data)
        return super().request_stream(payload)

    def _saw(self, interaction: str, data: bytes) -> None:
        text = repr(bytes(data).decode("utf-8", "replace"))
        # no format fields in the message itself: the data may hold braces
        self.log.info(f"{SAW_PREFIX} {interaction} data={{data}}", data=text)
