"""Coverage-guided fuzzing of the protocols' codecs and sans-IO connections (atheris).

Layout:

* :mod:`fuzz.harness`: the input format every target reads (byte chunks to feed, interleaved
  with API calls) and the :class:`~fuzz.harness.Crash` a target raises when an invariant
  breaks;
* ``fuzz/targets/<name>.py``: one target per file: ``PROTOCOL`` (the protocol it exercises)
  and ``one_input(data: bytes) -> None``, which raises only for a bug (an exception other than
  the protocol's documented ones, or a broken invariant);
* ``fuzz/drivers/``: the drivers that feed a sans-IO connection, shared by the client and
  server targets of a protocol;
* :mod:`fuzz.make_corpus`: writes the seed corpus ``fuzz/corpus/<target>/`` from the golden
  vectors of the test suite;
* :mod:`fuzz.run`: runs every target (or some) for a bounded time under atheris, one at a
  time, and prints inputs run and crashes per target and per protocol (``make fuzz``);
* ``fuzz/regressions/<target>/``: every crash input found, replayed by
  ``tests/fuzz_regressions`` with the seed corpus.

The targets import nothing from atheris: the runner instruments them, and the test suite
replays inputs through the same ``one_input`` without it.
"""
