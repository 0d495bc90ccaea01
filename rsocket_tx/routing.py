"""Routed responders: map routes in a request's metadata to handler methods.

The route of a request is its first routing tag (``Extensions/Routing.md``), read from
composite metadata (``message/x.rsocket.composite-metadata.v0``) or from metadata of type
``message/x.rsocket.routing.v0``, whichever the connection's SETUP named. Decorate methods of a
:class:`~rsocket_tx.responder.Responder` subclass::

    class Orders(Responder):
        authenticator = SimpleAuthenticator({"alice": "secret"})

        @route("orders.{id}")                                  # request-response
        def get_order(self, request, id):
            return {"id": id, "by": request.principal}           # encoded by the data MIME type

        @route("orders.feed", interaction="request_stream")
        async def feed(self, request):
            for n in range(request.data["count"]):
                yield {"n": n}

        @route.fallback()
        def other(self, request):
            raise RejectedError(f"nothing at {request.route!r}")

A pattern is dot-separated text in which ``{name}`` matches one non-empty segment (no dot); its
value is passed to the handler as a keyword argument and is in :attr:`Request.variables`.
Literal routes are matched first, then patterns in the order they were declared. A request
whose route matches nothing (or that has no route) goes to the fallback for its interaction if
there is one, else is answered with ERROR[REJECTED] naming the route.

The pattern that matched is :attr:`Request.route_pattern` (``"orders.{id}"``; a literal route is
its own pattern), and :func:`route_pattern` finds it for a responder without serving the
request: metrics and traces label requests by it, a bounded set a peer cannot grow
(:mod:`rsocket_tx.interceptors`).

Handlers take a :class:`Request` (plus the path variables) and return what the plain
:class:`~rsocket_tx.responder.Responder` methods return, except that values which are not
:class:`~rsocket_tx.core.payload.Payload` are encoded with the response's data codec
(:mod:`rsocket_tx.codecs`): JSON and CBOR objects, text, or bytes.
"""

from __future__ import annotations

import enum
import re
import weakref
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Callable,
    Iterable,
    Iterator,
    Mapping,
)
from typing import TYPE_CHECKING, Any, Final, TypeVar

from twisted.internet.defer import Deferred, ensureDeferred

from .codecs import DataDecodeError, codec_for
from .core.errors import InvalidError, RejectedError
from .core.payload import Payload
from .extensions import (
    COMPOSITE_METADATA,
    OCTET_STREAM,
    RequestMetadata,
    build_metadata,
    parse_metadata,
)
from .streams import DecodedStream

if TYPE_CHECKING:  # pragma: no cover
    from .extensions import Credentials
    from .responder import Responder
    from .streams import RequestStream

__all__ = ["route", "Request", "Router", "Payloads", "INTERACTIONS", "route_pattern"]

#: The interactions a route can serve, by the name of the Responder method that serves them.
INTERACTIONS = ("request_response", "fire_and_forget", "request_stream", "request_channel")

_ROUTES_ATTR = "__rsocket_routes__"
_FALLBACK_ATTR = "__rsocket_fallback__"
_DECODE_ATTR = "__rsocket_decode_inbound__"
_VARIABLE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

#: a handler method, as the decorators leave it
_Handler = TypeVar("_Handler", bound=Callable[..., object])


def _spoken(interaction: str) -> str:
    return interaction.replace("_", "-")


def _check_interaction(interaction: str) -> str:
    if interaction not in INTERACTIONS:
        raise ValueError(f"interaction must be one of {', '.join(INTERACTIONS)}; "
                         f"got {interaction!r}")
    return interaction


class route:  # noqa: N801 - a decorator, named like one
    """Decorator: serve ``patterns`` with this method, for one interaction.

    :param patterns: one or more routes (str), each literal or with ``{name}`` variables.
    :param interaction: ``"request_response"`` (default), ``"fire_and_forget"``,
        ``"request_stream"`` or ``"request_channel"``.
    :param decode: request-channel: the handler's :attr:`Request.inbound` yields the
        requester's further payloads decoded (:meth:`Request.decode`, by the request's data
        MIME type, as :attr:`Request.data` is) instead of Payloads; malformed data raises
        :class:`~rsocket_tx.core.errors.InvalidError` where it is consumed. It holds for the
        method, on every channel route it serves.
    :raises ValueError: no pattern, an empty or malformed pattern, an unknown interaction,
        ``decode`` with an interaction other than request-channel.

    Decorators stack: one method may serve several routes or interactions.
    """

    __slots__ = ("patterns", "interaction", "decode")

    def __init__(self, *patterns: str, interaction: str = "request_response",
                 decode: bool = False) -> None:
        if not patterns:
            raise ValueError("route() needs at least one route pattern")
        for pattern in patterns:
            _Pattern(pattern)  # validates
        self.patterns = patterns
        self.interaction = _check_interaction(interaction)
        if decode and interaction != "request_channel":
            raise ValueError("decode=True decodes a channel's inbound payloads: it needs "
                             f"interaction='request_channel', not {interaction!r}")
        self.decode = bool(decode)

    def __call__(self, fn: _Handler) -> _Handler:
        declared = getattr(fn, _ROUTES_ATTR, ())
        setattr(fn, _ROUTES_ATTR,
                declared + tuple((p, self.interaction) for p in self.patterns))
        if self.decode:
            setattr(fn, _DECODE_ATTR, True)
        return fn

    @staticmethod
    def fallback(*interactions: str) -> Callable[[_Handler], _Handler]:
        """Decorator: serve requests whose route matches nothing (or that have no route).

        :param interactions: which interactions it serves; none given: all four.
        :raises ValueError: an unknown interaction.
        """
        chosen = tuple(_check_interaction(i) for i in interactions) or INTERACTIONS

        def mark(fn: _Handler) -> _Handler:
            setattr(fn, _FALLBACK_ATTR, getattr(fn, _FALLBACK_ATTR, ()) + chosen)
            return fn
        return mark


class Payloads:
    """What a request-stream or request-channel handler returns when its items are
    :class:`~rsocket_tx.core.payload.Payload` already: they are sent as they are, without the
    per-item encoding step that other items go through (a hot stream saves a generator step
    per item).

    :param source: an iterable or async iterable of Payload.
    """

    __slots__ = ("source",)

    def __init__(self, source: Iterable[Payload] | AsyncIterable[Payload]) -> None:
        self.source = source


class _Pattern:
    __slots__ = ("text", "regex", "names")

    def __init__(self, text: str) -> None:
        if not isinstance(text, str) or not text:
            raise ValueError(f"a route pattern must be a non-empty str, got {text!r}")
        parts, names, pos = [], [], 0
        for m in _VARIABLE.finditer(text):
            parts.append(text[pos:m.start()])
            name = m.group(1)
            if name in names:
                raise ValueError(f"route pattern {text!r} names {{{name}}} twice")
            names.append(name)
            pos = m.end()
        parts.append(text[pos:])
        if any("{" in part or "}" in part for part in parts):
            raise ValueError(f"route pattern {text!r}: a variable is written {{name}}, "
                             f"with a Python identifier as its name")
        regex = None
        if names:
            regex = re.escape(parts[0]) + "".join(
                f"(?P<{name}>[^.]+){re.escape(part)}" for name, part in zip(names, parts[1:]))
        self.text = text
        self.names = tuple(names)
        self.regex = re.compile(regex) if regex is not None else None


class Router:
    """The routes of one Responder class, built once when the class is created.

    :raises TypeError: two methods serve the same route for the same interaction, or two
        fallbacks serve the same interaction.
    """

    __slots__ = ("_exact", "_patterns", "_fallback")

    def __init__(self, members: Mapping[str, Callable[..., object]]) -> None:
        self._exact: dict[str, dict[str, Callable[..., object]]] = {
            i: {} for i in INTERACTIONS}
        #: interaction -> [(pattern text, its regex, function)], in declaration order
        self._patterns: dict[str, list[tuple[str, re.Pattern[str], Callable[..., object]]]] = {
            i: [] for i in INTERACTIONS}
        self._fallback: dict[str, Callable[..., object]] = {}
        owners: dict[tuple[str, str], str] = {}
        for name, fn in members.items():
            for pattern, interaction in getattr(fn, _ROUTES_ATTR, ()):
                key = (pattern, interaction)
                if key in owners:
                    raise TypeError(f"route {pattern!r} ({_spoken(interaction)}) is served by "
                                    f"both {owners[key]}() and {name}()")
                owners[key] = name
                compiled = _Pattern(pattern)
                if compiled.regex is None:
                    self._exact[interaction][pattern] = fn
                else:
                    self._patterns[interaction].append((compiled.text, compiled.regex, fn))
            for interaction in getattr(fn, _FALLBACK_ATTR, ()):
                if interaction in self._fallback:
                    raise TypeError(f"two fallbacks serve {_spoken(interaction)}: "
                                    f"{self._fallback[interaction].__name__}() and {name}()")
                self._fallback[interaction] = fn

    @classmethod
    def for_class(cls, klass: type) -> Router | None:
        """The router of ``klass`` (its own and inherited routes), or None if it has none."""
        members: dict[str, object] = {}
        for base in reversed(klass.__mro__):
            members.update(vars(base))  # a subclass's attribute replaces its base's
        marked = {name: fn for name, fn in members.items()
                  if callable(fn) and (hasattr(fn, _ROUTES_ATTR) or hasattr(fn, _FALLBACK_ATTR))}
        return cls(marked) if marked else None

    def serves(self, interaction: str) -> bool:
        """Whether any route or fallback serves ``interaction``."""
        return bool(self._exact[interaction] or self._patterns[interaction]
                    or interaction in self._fallback)

    def routes(self) -> dict[str, list[str]]:
        """The declared route patterns per interaction (for documentation and logs)."""
        return {i: list(self._exact[i]) + [text for text, _, _ in self._patterns[i]]
                for i in INTERACTIONS}

    def find(self, interaction: str, name: str | None) -> tuple[str, Callable[..., object],
                                                                dict[str, str]] | None:
        """The route that serves route ``name`` (its literal route, else the first pattern
        that matches it), the fallback not included.

        :param interaction: one of :data:`INTERACTIONS`.
        :param name: the request's route, or None.
        :returns: ``(pattern, function, variables)``: ``pattern`` the text of the ``@route``
            pattern (``"orders.{id}"``); None when no route serves ``name``.
        """
        if name is None:
            return None
        fn = self._exact[interaction].get(name)
        if fn is not None:
            return name, fn, {}
        for text, regex, fn in self._patterns[interaction]:
            m = regex.fullmatch(name)
            if m is not None:
                return text, fn, m.groupdict()
        return None

    def pattern(self, interaction: str, name: str | None) -> str | None:
        """The ``@route`` pattern serving route ``name`` (see :meth:`find`), or None when
        none does (a fallback serves it, or nothing)."""
        found = self.find(interaction, name)
        return None if found is None else found[0]

    def match(self, interaction: str,
              name: str | None) -> tuple[Callable[..., object], dict[str, str]]:
        """Find the handler of route ``name``.

        :returns: ``(function, variables)``.
        :raises RejectedError: nothing serves it and there is no fallback.
        """
        found = self.find(interaction, name)
        if found is not None:
            return found[1], found[2]
        fn = self._fallback.get(interaction)
        if fn is not None:
            return fn, {}
        if name is None:
            raise RejectedError(f"the {_spoken(interaction)} request has no route (a routing "
                                f"tag in its metadata)")
        others = [_spoken(i) for i in INTERACTIONS
                  if i != interaction and self._known(i, name)]
        hint = f" (it serves {', '.join(others)})" if others else ""
        raise RejectedError(f"no route {name!r} for {_spoken(interaction)}{hint}")

    def _known(self, interaction: str, name: str) -> bool:
        return name in self._exact[interaction] or any(
            regex.fullmatch(name) for _, regex, _ in self._patterns[interaction])

    def dispatch(self, responder: Responder, interaction: str, payload: Payload,
                 inbound: RequestStream | None = None) -> object:
        """Serve one request: parse its metadata, match its route, authenticate, call the
        handler and encode what it returns. Returns what the protocol expects of the plain
        Responder method (a Payload, an iterable, or a Deferred of one).

        :raises RejectedError: no route, or authentication refused.
        """
        setup = responder.setup
        metadata = parse_metadata(payload.metadata,
                                  setup.metadata_mime_type if setup is not None else OCTET_STREAM)
        found = self.find(interaction, metadata.route)
        if found is None:  # the fallback, or RejectedError
            fn, variables = self.match(interaction, metadata.route)
            pattern = None
        else:
            pattern, fn, variables = found
        request = Request(responder, interaction, payload, metadata, variables, inbound)
        request.route_pattern = pattern
        if inbound is not None and getattr(fn, _DECODE_ATTR, False):
            request.inbound = DecodedStream(inbound, request.decode)
        authenticator = responder.authenticator
        if authenticator is None:
            request.principal = responder.principal
            return _call(fn, request)
        principal = authenticator.authenticate_request(metadata.auth, responder.principal)
        if isinstance(principal, Deferred):
            return principal.addCallback(_call_as, fn, request)
        request.principal = principal
        return _call(fn, request)


#: responder class -> its Router (None: it has no routes); weak: a class may be freed
_routers: weakref.WeakKeyDictionary[type, Router | None] = weakref.WeakKeyDictionary()


def route_pattern(responder: object, interaction: str, route: str | None) -> str | None:
    """The ``@route`` pattern that serves ``route`` on ``responder`` (``"orders.{id}"`` for
    ``"orders.42"``; a literal route is its own pattern), without serving anything: what
    :attr:`Request.route_pattern` will be.

    :param responder: a :class:`~rsocket_tx.responder.Responder` (any object: one whose class
        declares no ``@route`` has no pattern).
    :param interaction: ``"request_response"``, ``"fire_and_forget"``, ``"request_stream"``
        or ``"request_channel"`` (another, e.g. ``"metadata_push"``, has no routes).
    :param route: the request's route (first routing tag), or None.
    :returns: the pattern, or None when no ``@route`` serves it (it has no route, a fallback
        serves it, or nothing does).
    """
    if route is None or interaction not in INTERACTIONS:
        return None
    klass = type(responder)
    try:
        router = _routers[klass]
    except KeyError:
        router = _routers[klass] = Router.for_class(klass)
    return None if router is None else router.pattern(interaction, route)


def _call_as(principal: object, fn: Callable[..., object], request: Request) -> object:
    request.principal = principal
    return _call(fn, request)


def _call(fn: Callable[..., object], request: Request) -> object:
    result: Any = fn(request.responder, request, **request.variables)  # (the application's)
    interaction = request.interaction
    if interaction == "fire_and_forget":
        return result
    convert = request.encode if interaction == "request_response" else request.encode_items
    if isinstance(result, Deferred):
        return result.addCallback(convert)
    if hasattr(result, "__await__"):
        return ensureDeferred(result).addCallback(convert)
    return convert(result)


class Request:
    """One routed request, as a handler sees it.

    :ivar responder: the :class:`~rsocket_tx.responder.Responder` serving it.
    :ivar interaction: ``"request_response"``, ``"fire_and_forget"``, ``"request_stream"`` or
        ``"request_channel"``.
    :ivar payload: the request :class:`~rsocket_tx.core.payload.Payload` as received.
    :ivar metadata: the decoded :class:`~rsocket_tx.extensions.RequestMetadata` (route, tags,
        auth, per-stream MIME types, tracing, every composite entry, per-entry errors).
    :ivar variables: ``dict[str, str]``: the route's path variables.
    :ivar principal: who made the request, as the responder's authenticator decided (the
        per-request credentials' principal, else the connection's); None without an
        authenticator unless the connection has one.
    :ivar inbound: request-channel: the requester's further payloads as a
        :class:`~rsocket_tx.streams.RequestStream` (decode each with :meth:`decode`), or, for
        a handler routed with ``decode=True``, as a
        :class:`~rsocket_tx.streams.DecodedStream` of decoded values; else None.
    :ivar route_pattern: the ``@route`` pattern that matched the route (``"orders.{id}"``;
        a literal route is its own pattern), None for a request served by a fallback.
    """

    __slots__ = ("responder", "interaction", "payload", "metadata", "variables", "principal",
                 "inbound", "route_pattern", "_data", "_response_mime", "_response_metadata")

    def __init__(self, responder: Responder, interaction: str, payload: Payload,
                 metadata: RequestMetadata, variables: dict[str, str],
                 inbound: RequestStream | DecodedStream | None = None) -> None:
        self.responder = responder
        self.interaction = interaction
        self.payload = payload
        self.metadata = metadata
        self.variables = variables
        self.inbound = inbound
        self.principal: Any = None  # (what the application's authenticator says)
        self.route_pattern: str | None = None
        self._data: object = _UNSET
        self._response_mime: str | None = None
        self._response_metadata: bytes | None | _Unset = _UNSET

    @property
    def route(self) -> str | None:
        """The route (first routing tag), or None."""
        return self.metadata.route

    @property
    def auth(self) -> Credentials | None:
        """The request's own credentials (:class:`~rsocket_tx.extensions.SimpleAuth`,
        ``BearerAuth`` or ``CustomAuth``), or None; the connection's are on ``setup.auth``."""
        return self.metadata.auth

    @property
    def data_mime_type(self) -> str:
        """The request data's MIME type: the per-stream one, else the connection's."""
        mime = self.metadata.data_mime_type
        if mime is not None:
            return mime
        setup = self.responder.setup
        return setup.data_mime_type if setup is not None else OCTET_STREAM

    @property
    def data(self) -> Any:
        """The request data decoded by :attr:`data_mime_type` (JSON/CBOR object, str for text,
        bytes otherwise).

        :raises InvalidError: the data is not valid for its MIME type (ERROR[INVALID] when it
            escapes the handler).
        """
        if self._data is _UNSET:
            self._data = self.decode(self.payload)
        return self._data

    def decode(self, payload: Payload) -> Any:
        """Decode another payload of this request (e.g. from :attr:`inbound`) by its MIME type.

        :raises InvalidError: malformed for the MIME type.
        """
        mime = self.data_mime_type
        try:
            return codec_for(mime).decode(payload.data)
        except DataDecodeError as exc:
            raise InvalidError(f"cannot decode the request data as {mime}: {exc}") from None

    @property
    def response_mime_type(self) -> str:
        """The MIME type responses are encoded with: the first of the requester's accepted
        types (``message/x.rsocket.accept-mime-types.v0``) that has a codec, else the request's
        data MIME type."""
        if self._response_mime is None:
            requested = self.data_mime_type
            chosen = requested
            fallback = codec_for(None)
            for mime in self.metadata.accept_mime_types:
                if mime == requested or codec_for(mime) is not fallback:
                    chosen = mime
                    break
            self._response_mime = chosen
        return self._response_mime

    def _metadata_for_response(self) -> bytes | None:
        # spec (PerStreamDataMimeTypesDefinition): a response whose data MIME type differs from
        # the one the requester specified carries it in composite metadata
        if self._response_metadata is _UNSET:
            mime = self.response_mime_type
            setup = self.responder.setup
            if mime != self.data_mime_type and setup is not None \
                    and setup.metadata_mime_type == COMPOSITE_METADATA:
                self._response_metadata = build_metadata(COMPOSITE_METADATA, data_mime_type=mime)
            else:
                self._response_metadata = None
        return self._response_metadata

    def encode(self, value: object) -> Payload | None:
        """Turn a handler's value into a response Payload: a Payload is sent as is, None
        completes with no payload, anything else is encoded by :attr:`response_mime_type`.

        :raises TypeError: the codec cannot encode the value (e.g. a dict for a bytes MIME).
        """
        if value is None:
            return None
        return self._encode_value(value)

    def encode_items(self, source: object) -> Iterable[Payload] | AsyncIterable[Payload]:
        """Wrap a stream handler's iterable or async iterable so each item is encoded (as
        :meth:`encode`, except that None is encoded too, e.g. as JSON ``null``); a
        :class:`Payloads` source is returned unwrapped.

        :raises TypeError: ``source`` is not an iterable (or is a single str/bytes/Payload).
        """
        if isinstance(source, Payloads):
            return source.source
        if isinstance(source, (str, bytes, bytearray, memoryview, dict, Payload)) or not \
                isinstance(source, (Iterable, AsyncIterable)):
            raise TypeError(f"a {_spoken(self.interaction)} handler must return an iterable or "
                            f"async iterable of items, not {type(source).__name__}")
        if isinstance(source, AsyncIterable):
            return self._encode_async(source)
        return self._encode_sync(source)

    def _encode_value(self, value: object) -> Payload:
        if isinstance(value, Payload):
            return value
        return Payload(codec_for(self.response_mime_type).encode(value),
                       self._metadata_for_response())

    def _encode_sync(self, source: Iterable[object]) -> Iterator[Payload]:
        it = iter(source)
        encode = self._encode_value
        try:
            for value in it:
                yield encode(value)
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()

    async def _encode_async(self, source: AsyncIterable[object]) -> AsyncIterator[Payload]:
        it = source.__aiter__()
        encode = self._encode_value
        try:
            async for value in it:
                yield encode(value)
        finally:
            aclose = getattr(it, "aclose", None)
            if aclose is not None:
                await aclose()

    def __repr__(self) -> str:
        return (f"Request({_spoken(self.interaction)}, route={self.route!r}, "
                f"variables={self.variables!r}, principal={self.principal!r})")


class _Unset(enum.Enum):
    UNSET = enum.auto()


#: "not computed yet" (a Request's decoded data and response metadata; None is a value)
_UNSET: Final = _Unset.UNSET
