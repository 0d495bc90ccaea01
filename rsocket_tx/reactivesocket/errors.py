"""How the 2015 draft's errors map to rsocket_tx's exceptions (:mod:`rsocket_tx.core.errors`).

The draft's ERROR frame has no error code: its data is the error information. rsocket_tx
writes an exception's message there as UTF-8 and reads any stream ERROR back as an
:class:`~rsocket_tx.core.errors.ApplicationError` carrying the text (undecodable bytes
replaced); an ERROR on stream 0 ends the connection and is read back as a
:class:`~rsocket_tx.core.errors.ConnectionError`. So the RSocket 1.0 distinctions REJECTED,
CANCELED and INVALID do not cross the wire: the message says what happened.

SETUP_ERROR has codes (draft §Setup Error Frame): they map both ways to the RSocket 1.0
setup errors of the same names.
"""

from __future__ import annotations

from ..core import errors as E
from .frames import SetupErrorCode

__all__ = ["error_data", "setup_error_code", "setup_error_from_code", "stream_error"]


def error_data(error: E.RSocketError | Exception, room: int) -> bytes:
    """The ERROR (or SETUP_ERROR) data for ``error``: its message in UTF-8, cut to ``room``
    bytes (ending with ``...``) when longer.

    :param error: an :class:`~rsocket_tx.core.errors.RSocketError` (its ``message``) or any
        exception (its ``str``).
    :param room: the most bytes the data may take (at least 3).
    """
    message = error.message if isinstance(error, E.RSocketError) else str(error)
    data = message.encode("utf-8", "replace")
    if len(data) > room:
        data = data[:room - 3].decode("utf-8", "ignore").encode("utf-8") + b"..."
    return data


def stream_error(data: bytes) -> E.ApplicationError:
    """The exception a stream ERROR's ``data`` becomes: ApplicationError(UTF-8 text)."""
    return E.ApplicationError(data.decode("utf-8", "replace"))


def setup_error_code(error: E.SetupError) -> SetupErrorCode:
    """The SETUP_ERROR code for one of our setup errors: InvalidSetupError ->
    INVALID_SETUP, UnsupportedSetupError -> UNSUPPORTED_SETUP, any other -> REJECTED_SETUP."""
    if isinstance(error, E.InvalidSetupError):
        return SetupErrorCode.INVALID_SETUP
    if isinstance(error, E.UnsupportedSetupError):
        return SetupErrorCode.UNSUPPORTED_SETUP
    return SetupErrorCode.REJECTED_SETUP


def setup_error_from_code(code: int, data: bytes) -> E.SetupError:
    """The exception a received SETUP_ERROR becomes (a code not in the draft's table: a
    RejectedSetupError whose message names it)."""
    message = data.decode("utf-8", "replace")
    if code == SetupErrorCode.INVALID_SETUP:
        return E.InvalidSetupError(message)
    if code == SetupErrorCode.UNSUPPORTED_SETUP:
        return E.UnsupportedSetupError(message)
    if code == SetupErrorCode.REJECTED_SETUP:
        return E.RejectedSetupError(message)
    return E.RejectedSetupError(f"SETUP_ERROR with unknown code 0x{code:04X}: {message}")
