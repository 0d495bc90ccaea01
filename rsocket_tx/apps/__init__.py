"""Applications shipped with rsocket_tx: responders served with ``twistd rsocket --responder``
or ``rsocket-tx serve --responder`` (DESIGN §2: library code never depends on them).

* :mod:`rsocket_tx.apps.demo`: the demo responder, the faces' default;
* :mod:`rsocket_tx.apps.streamlog`: the durable stream log and its responder (the Spark data
  source's peer);
* :mod:`rsocket_tx.apps.orders`: the routed, authenticated order service of the extensions
  documentation.

Apps sit on the API layer (:class:`~rsocket_tx.Responder`, :func:`~rsocket_tx.route`) and
import nothing of the faces; nothing outside the apps and the faces imports them
(``tests/test_layout.py``, ``tests/test_layers.py``). This package imports none of its modules.
"""
