"""``python -m rsocket_tx``: the ``rsocket-tx`` command line (see :mod:`rsocket_tx.faces.main`)."""

from rsocket_tx.faces.main import main

if __name__ == "__main__":
    main()
