"""ReactiveSocketConnection speaks what RSocketProtocol (and the bridge and lease handle)
use on their connection: every ``conn.<name>`` / ``self._conn.<name>`` / ``connection.<name>``
those modules use exists on it. A change to the Twisted layer that starts using a new
connection attribute fails here, not in a loopback test."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from rsocket_tx.core.config import ConnectionConfig
from rsocket_tx.reactivesocket.connection import ReactiveSocketConnection

from .conn_helpers import SETUP

PACKAGE = Path(__file__).resolve().parents[2] / "rsocket_tx"
USERS = ["protocol.py", "bridge.py", "lease.py"]
CONNECTION_NAMES = {"conn", "_conn", "connection"}


def used_names(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in CONNECTION_NAMES or \
                isinstance(owner, ast.Attribute) and owner.attr in CONNECTION_NAMES:
            names.add(node.attr)
    return names


@pytest.mark.parametrize("module", USERS)
@pytest.mark.parametrize("role", ["client", "server"])
def test_every_name_the_twisted_layer_uses_exists(module, role):
    conn = ReactiveSocketConnection(role, ConnectionConfig(),
                                    setup=SETUP if role == "client" else None)
    names = used_names(PACKAGE / module)
    assert names, module
    missing = sorted(n for n in names if not hasattr(conn, n))
    assert missing == []
