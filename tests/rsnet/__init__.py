"""Tests of the Reactive Streams network protocol (rsocket_tx.rsnet)."""
