"""Shared helpers of the rsocket-py interop peer scripts (server.py, client.py).

Mirrors ``../common.js``: same command line, same JSON output, same demo responder rules.
The formats are documented in ``tests/interop/peers.py`` and ``README.md``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import sys

HOST = "127.0.0.1"
MAX_REQUEST_N = 2_147_483_647

EXIT_OK = 0
EXIT_RSOCKET_ERROR = 1
EXIT_FAILURE = 2
EXIT_UNSUPPORTED = 3

INTERACTIONS = (
    "request-response",
    "fire-and-forget",
    "metadata-push",
    "request-stream",
    "request-channel",
)


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse would print usage and exit 2 with text output
        raise UsageError(message)


def emit(obj: dict) -> None:
    """Write one JSON line to stdout and flush it."""
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def finish(code: int, obj: dict | None = None):
    if obj is not None:
        emit(obj)
    sys.stdout.flush()
    raise SystemExit(code)


def pattern(n: int) -> bytes:
    """The repeated pattern of --data-size/--metadata-size: byte i is i % 256."""
    return bytes(range(256)) * (n // 256) + bytes(range(n % 256))


def describe_payload(data: bytes | None, metadata: bytes | None, mode: str) -> dict:
    """JSON form of a payload; mode is "full", "digest" or "both" (see common.js)."""
    data = bytes(data or b"")
    out: dict = {}
    if mode != "digest":
        out["data"] = base64.b64encode(data).decode("ascii")
        out["metadata"] = None if metadata is None else base64.b64encode(metadata).decode("ascii")
    if mode != "full":
        out["data_len"] = len(data)
        out["data_sha256"] = hashlib.sha256(data).hexdigest()
        out["metadata_len"] = None if metadata is None else len(metadata)
        out["metadata_sha256"] = (
            None if metadata is None else hashlib.sha256(bytes(metadata)).hexdigest()
        )
    return out


def error_requested(data: bytes | None) -> str | None:
    """The application error message if data starts with ``error:``, else None."""
    data = bytes(data or b"")
    if data.startswith(b"error:"):
        return data[len(b"error:"):].decode("utf-8", "replace")
    return None


def stream_count(data: bytes | None) -> int:
    """Request-stream count: decimal data, 10 if empty; ValueError otherwise."""
    text = bytes(data or b"").decode("latin-1")
    if text == "":
        return 10
    if not text.isdigit():
        raise ValueError(f"request-stream data must be a decimal count, got {text!r}")
    return int(text)


def _add_payload_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--data")
    group.add_argument("--data-b64")
    group.add_argument("--data-size", type=int)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--metadata")
    group.add_argument("--metadata-b64")
    group.add_argument("--metadata-size", type=int)


def parse_client_args(argv: list[str]) -> argparse.Namespace:
    parser = _Parser(prog="client.py", add_help=False)
    parser.add_argument("interaction", choices=INTERACTIONS)
    parser.add_argument("--host", default=HOST)
    parser.add_argument("--port", type=int, required=True)
    _add_payload_options(parser)
    parser.add_argument("--request-n", type=int, default=MAX_REQUEST_N)
    parser.add_argument("--take", type=int)
    parser.add_argument("--count", type=int, default=3)
    parser.add_argument("--fragment", type=int)
    parser.add_argument("--completion", choices=("flag", "frame"), default="flag")
    parser.add_argument("--digest", action="store_true")
    parser.add_argument("--timeout", type=int, default=30)
    parser.add_argument("--keepalive", type=int, default=20_000)
    parser.add_argument("--lifetime", type=int, default=90_000)
    parser.add_argument("--setup-data")
    parser.add_argument("--setup-metadata")
    args = parser.parse_args(argv)
    if args.count < 1:
        raise UsageError("--count must be >= 1 (the first payload travels in REQUEST_CHANNEL)")
    args.mode = (
        "digest"
        if args.digest or args.data_size is not None or args.metadata_size is not None
        else "full"
    )
    return args


def parse_server_args(argv: list[str]) -> argparse.Namespace:
    parser = _Parser(prog="server.py", add_help=False)
    parser.add_argument("--host", default=HOST)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--fragment", type=int)
    parser.add_argument("--completion", choices=("flag", "frame"), default="flag")
    parser.add_argument("--request-n", type=int, default=256)
    parser.add_argument("--timeout", type=int, default=600)
    parser.add_argument("--watch-stdin", action="store_true")
    return parser.parse_args(argv)


def payload_from_args(args: argparse.Namespace) -> tuple[bytes, bytes | None]:
    if args.data_size is not None:
        data = pattern(args.data_size)
    elif args.data_b64 is not None:
        data = base64.b64decode(args.data_b64)
    else:
        data = (args.data or "").encode("utf-8")
    if args.metadata_size is not None:
        metadata: bytes | None = pattern(args.metadata_size)
    elif args.metadata_b64 is not None:
        metadata = base64.b64decode(args.metadata_b64)
    elif args.metadata is not None:
        metadata = args.metadata.encode("utf-8")
    else:
        metadata = None
    return data, metadata
