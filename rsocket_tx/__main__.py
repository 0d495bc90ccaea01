"""``python -m rsocket_tx``: the ``rsocket-tx`` command line (see :mod:`rsocket_tx.cli`)."""

from rsocket_tx.cli import main

if __name__ == "__main__":
    main()
