"""Example services: moved to :mod:`rsocket_tx.apps` (``rsocket_tx.examples.orders`` is
:mod:`rsocket_tx.apps.orders`, the same module object; the name stays importable)."""
