"""Shared helpers for the extension codec tests."""

from __future__ import annotations


def h(*fields: str) -> bytes:
    """Concatenate hex fields (whitespace allowed) into bytes."""
    return bytes.fromhex("".join(fields))
