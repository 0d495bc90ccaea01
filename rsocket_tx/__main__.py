"""``python -m rsocket_tx``: the ``rsocket-tx`` command line (see :mod:`rsocket_tx.faces.cli`)."""

from rsocket_tx.faces.cli import main

if __name__ == "__main__":
    main()
