"""The 2015 draft's sans-IO modules (codec, errors, connection, and the package's own
``__init__``) import no Twisted: imported in a fresh interpreter whose import system refuses
it, with ``rsocket_tx`` itself (whose ``__init__`` belongs to the Twisted layer) a stand-in
package (DESIGN §2; as tests/test_layers.py does for the other protocols)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SANS_IO = ["rsocket_tx.reactivesocket", "rsocket_tx.reactivesocket.frames",
           "rsocket_tx.reactivesocket.errors", "rsocket_tx.reactivesocket.connection"]

PROBE = r"""
import importlib, sys, types

class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("twisted", "zope"):
            raise ImportError("the sans-IO layers must not import " + name)
        return None

sys.meta_path.insert(0, Refuse())
stub = types.ModuleType("rsocket_tx")
stub.__path__ = [sys.argv[1] + "/rsocket_tx"]
sys.modules["rsocket_tx"] = stub
for name in sys.argv[2:]:
    importlib.import_module(name)
from rsocket_tx.reactivesocket import sniff, ReactiveSocketConnection
assert sniff(b"") is not None and ReactiveSocketConnection
"""


def test_sans_io_modules_import_without_twisted():
    result = subprocess.run([sys.executable, "-c", PROBE, str(ROOT), *SANS_IO],
                            capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr


def test_the_probe_catches_a_twisted_import():
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROOT), "rsocket_tx.reactivesocket.protocol"],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode != 0 and "must not import twisted" in result.stderr
