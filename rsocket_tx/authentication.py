"""Pluggable authentication for responders (Authentication extension, ``Extensions/Security``).

An :class:`Authenticator` set as a :class:`~rsocket_tx.responder.Responder`'s ``authenticator``
sees the credentials a client sent in its SETUP metadata and in each request's metadata, in
the ``message/x.rsocket.authentication.v0`` format (alone, or as an entry of composite
metadata). It decides who the caller is (the *principal*) or rejects:

* a SETUP with invalid credentials is answered with ERROR[REJECTED_SETUP] and the connection
  closes;
* a request with invalid credentials, or with none on a connection that was not authenticated
  at SETUP while :attr:`Authenticator.required` is true, is answered with ERROR[REJECTED] and the
  handler is never called.

Credentials sent with a request override the connection's for that request. Subclass
:class:`Authenticator` and implement :meth:`~Authenticator.verify`, or use the ready
:class:`SimpleAuthenticator` (username and password) and :class:`BearerAuthenticator` (token).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping
from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred

from .core.errors import RejectedError, RejectedSetupError
from .extensions import BearerAuth, Credentials, SimpleAuth

__all__ = ["Authenticator", "SimpleAuthenticator", "BearerAuthenticator", "AnyAuthenticator"]


def _kind(credentials: Credentials) -> str:
    if isinstance(credentials, SimpleAuth):
        return "simple"
    if isinstance(credentials, BearerAuth):
        return "bearer"
    return f"custom ({credentials.auth_type!r})"


class Authenticator:
    """Base class: turns credentials into a principal, or rejects them.

    :ivar required: when true (the default), every request must be authenticated, by the
        connection's SETUP credentials or by its own; when false, requests without any
        credentials are served with principal None (anonymous).
    """

    required: bool = True

    def verify(self, credentials: Credentials) -> Any:
        """Check one set of credentials.

        :param credentials: :class:`~rsocket_tx.extensions.SimpleAuth`,
            :class:`~rsocket_tx.extensions.BearerAuth` or
            :class:`~rsocket_tx.extensions.CustomAuth`.
        :returns: the principal (any object but None: a user name, a user record) for valid
            credentials; None for invalid ones. May return a Deferred or be a coroutine.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement verify()")

    def authenticate_setup(self, credentials: Credentials | None) -> Any:
        """Authenticate a connection from its SETUP credentials.

        :returns: the connection's principal (None: the SETUP carried no credentials), or a
            Deferred of it.
        :raises RejectedSetupError: the credentials are invalid (directly or via the Deferred).
        """
        if credentials is None:
            return None
        return _then(self.verify(credentials), _setup_verdict, credentials)

    def authenticate_request(self, credentials: Credentials | None, principal: Any) -> Any:
        """Authenticate one request.

        :param credentials: the request's own credentials, or None.
        :param principal: the connection's principal from SETUP (None if it had none).
        :returns: the request's principal, or a Deferred of it.
        :raises RejectedError: invalid credentials, or none at all while :attr:`required`.
        """
        if credentials is None:
            if principal is None and self.required:
                raise RejectedError("authentication required: send credentials in the SETUP "
                                    "or the request metadata")
            return principal
        return _then(self.verify(credentials), _request_verdict, credentials)


def _then(result: Any, verdict: Callable[[Any, Credentials], Any],
          credentials: Credentials) -> Any:
    if isinstance(result, Deferred) or hasattr(result, "__await__"):
        d = result if isinstance(result, Deferred) else ensureDeferred(result)
        return d.addCallback(verdict, credentials)
    return verdict(result, credentials)


def _setup_verdict(principal: Any, credentials: Credentials) -> Any:
    if principal is None:
        raise RejectedSetupError(f"invalid {_kind(credentials)} credentials")
    return principal


def _request_verdict(principal: Any, credentials: Credentials) -> Any:
    if principal is None:
        raise RejectedError(f"invalid {_kind(credentials)} credentials")
    return principal


class SimpleAuthenticator(Authenticator):
    """Username and password (the ``simple`` auth type, ``Extensions/Security/Simple.md``).

    :param users: a mapping of username to password (compared in constant time; the principal
        is the username), or a callable ``check(username, password)`` returning the principal or
        None (it may return a Deferred).
    :param required: see :attr:`Authenticator.required`.
    :raises TypeError: ``users`` is neither a mapping nor callable.
    """

    def __init__(self, users: Mapping[str, str] | Callable[[str, str], Any], *,
                 required: bool = True) -> None:
        self._check = _checker(users, "users", "a mapping of username to password",
                               lambda table: lambda name, password: _lookup(table, name,
                                                                            password))
        self.required = required

    def verify(self, credentials: Credentials) -> Any:
        """The principal for valid :class:`~rsocket_tx.extensions.SimpleAuth`, else None."""
        if not isinstance(credentials, SimpleAuth):
            return None
        return self._check(credentials.username, credentials.password)


def _checker(source: object, name: str, mapping_kind: str,
             from_table: Callable[[dict[str, Any]], Callable[..., Any]]) -> Callable[..., Any]:
    """The check function of a mapping (copied, looked up by ``from_table``) or a callable."""
    if isinstance(source, Mapping):
        return from_table(dict(source))
    if callable(source):
        return source
    raise TypeError(f"{name} must be {mapping_kind} or a callable, got {type(source).__name__}")


def _lookup(table: Mapping[str, str], name: str, password: str) -> str | None:
    expected = table.get(name)
    if expected is None:
        return None
    return name if hmac.compare_digest(expected.encode(), password.encode()) else None


class BearerAuthenticator(Authenticator):
    """Bearer tokens (the ``bearer`` auth type, ``Extensions/Security/Bearer.md``).

    :param tokens: a mapping of token to principal, or a callable ``check(token)`` returning the
        principal or None (it may return a Deferred; e.g. verify a JWT).
    :param required: see :attr:`Authenticator.required`.
    :raises TypeError: ``tokens`` is neither a mapping nor callable.
    """

    def __init__(self, tokens: Mapping[str, object] | Callable[[str], Any], *,
                 required: bool = True) -> None:
        self._check = _checker(tokens, "tokens", "a mapping of token to principal",
                               lambda table: table.get)
        self.required = required

    def verify(self, credentials: Credentials) -> Any:
        """The principal for a known :class:`~rsocket_tx.extensions.BearerAuth` token."""
        if not isinstance(credentials, BearerAuth):
            return None
        return self._check(credentials.token)


class AnyAuthenticator(Authenticator):
    """Accept credentials that any of several authenticators accepts (e.g. simple or bearer).

    :param authenticators: tried in order; the first principal that is not None wins. Their
        :meth:`~Authenticator.verify` methods must answer synchronously (not a Deferred).
    :param required: see :attr:`Authenticator.required`.
    :raises ValueError: no authenticator given.
    """

    def __init__(self, *authenticators: Authenticator, required: bool = True) -> None:
        if not authenticators:
            raise ValueError("AnyAuthenticator needs at least one authenticator")
        self._authenticators = authenticators
        self.required = required

    def verify(self, credentials: Credentials) -> Any:
        """The first principal any authenticator gives for ``credentials``, else None."""
        for authenticator in self._authenticators:
            principal = authenticator.verify(credentials)
            if isinstance(principal, Deferred):
                raise TypeError(f"{type(authenticator).__name__}.verify returned a Deferred; "
                                f"AnyAuthenticator needs synchronous authenticators")
            if principal is not None:
                return principal
        return None
