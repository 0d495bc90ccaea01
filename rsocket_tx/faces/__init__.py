"""The faces of rsocket_tx (DESIGN §2): what a user types or configures. Each builds one
settings object (:class:`~rsocket_tx.core.config.ConnectionConfig`) and passes it down.

* :mod:`rsocket_tx.faces.main`: the ``rsocket-tx`` command (``python -m rsocket_tx``), which
  gathers the commands of every protocol's face;
* :mod:`rsocket_tx.faces.cli`: RSocket's commands of ``rsocket-tx`` (its face, as
  :mod:`rsocket_tx.jini.cli` is Jini's);
* :mod:`rsocket_tx.faces.tap`: the ``twistd rsocket`` plugin's options and service, shared
  with ``rsocket-tx serve``;
* :mod:`rsocket_tx.faces.rsocket_settings`: the RSocket family's server settings and option
  table, shared by RSocket's faces and the 2015 draft's (not a face);
* the face kit, the protocol-neutral plumbing every protocol's face imports (and which imports
  no face): :mod:`rsocket_tx.faces.clikit` (exit statuses, payload input and output,
  timeouts, the parser class) and :mod:`rsocket_tx.faces.serving` (twistd options, option
  checks, ``--listen``, the multi-endpoint service).

No face imports another protocol's face (``tests/test_layers.py``).

The faces sit on top: nothing below them imports them (``tests/test_layout.py``). The demo
responder they serve by default is an app (:mod:`rsocket_tx.apps.demo`). This package imports
none of its modules.
"""
