"""The faces of rsocket_tx (DESIGN §2): what a user types or configures. Each builds one
settings object (:class:`~rsocket_tx.core.config.ConnectionConfig`) and passes it down.

* :mod:`rsocket_tx.faces.cli`: the ``rsocket-tx`` command line (``python -m rsocket_tx``);
* :mod:`rsocket_tx.faces.tap`: the ``twistd rsocket`` plugin's options and service, shared
  with ``rsocket-tx serve``;
* :mod:`rsocket_tx.faces.serving`: what the server faces of every protocol share (option
  checks, ``--listen``, the multi-endpoint service), used by ``twistd jini-mux`` too.

The faces sit on top: nothing below them imports them (``tests/test_layout.py``). The demo
responder they serve by default is an app (:mod:`rsocket_tx.apps.demo`). This package imports
none of its modules.
"""
