"""Benchmark harness comparing rsocket_tx with raw Twisted and rsocket-py.

Run ``python -m benchmarks.run`` from the repository root; see ``benchmarks/README.md``.
"""
