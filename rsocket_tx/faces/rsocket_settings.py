"""The RSocket family's server settings: the option table, its validation and the
:class:`ServerSettings` it produces, shared by the faces that serve RSocket responders:
``twistd rsocket`` and ``rsocket-tx serve`` (:mod:`rsocket_tx.faces.tap`,
:mod:`rsocket_tx.faces.cli`), and ``twistd rs2015`` and ``rsocket-tx rs2015 serve``
(:mod:`rsocket_tx.reactivesocket.tap`, :mod:`rsocket_tx.reactivesocket.cli`).

This module is not a face: it imports none, so that each of those faces imports it rather than
another protocol's face (DESIGN §2). What is not RSocket's (option checks, ``--listen``,
``module:Class`` loading, the multi-endpoint service) is in the face kit,
:mod:`rsocket_tx.faces.serving`.

* :data:`SERVER_OPTIONS` / :data:`SERVER_FLAGS` — the option table the faces generate their
  parsers from;
* :func:`parse_server_settings` — strings (or numbers) in, a validated :class:`ServerSettings`
  out;
* :class:`ResponderArgOption` — the repeatable ``--responder-arg`` of a twistd ``Options``.
"""

from __future__ import annotations

import functools
import inspect
import keyword
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from twisted.python import usage

from ..core.config import (
    DEFAULT_DRAIN_TIMEOUT,
    DEFAULT_LEASE_GRACE,
    DEFAULT_MAX_CONCURRENT_STREAMS,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_LIFETIME_LIMIT,
    DEFAULT_MAX_REASSEMBLY_BUFFER_SIZE,
    DEFAULT_MAX_RESUME_BUFFER_SIZE,
    DEFAULT_MAX_RESUME_SESSIONS,
    DEFAULT_MAX_SEND_BUFFER_SIZE,
    DEFAULT_MAX_SETUP_FRAME_SIZE,
    DEFAULT_RESUME_SESSION_TIMEOUT,
    ConnectionConfig,
)
from ..transports.endpoints import server_endpoint
from .serving import (
    SettingsError,
    import_named,
    load_class,
    named_class,
    parse_int_option,
    parse_listen,
)
from .serving import check_listen as check_endpoint

if TYPE_CHECKING:  # pragma: no cover
    from ..responder import Responder

__all__ = [
    "ServerSettings",
    "ServerOption",
    "SERVER_OPTIONS",
    "ServerFlag",
    "SERVER_FLAGS",
    "ResponderArgOption",
    "parse_server_settings",
    "parse_fragment_size",
    "check_listen",
    "load_responder",
    "parse_responder_args",
    "load_lease_policy",
    "DEFAULT_LISTEN",
    "DEBUG_HELP",
    "LISTEN_HELP",
    "MAX_FRAME_SIZE",
    "MIN_FRAGMENT_SIZE",
]

#: Where the server listens when no endpoint is given.
DEFAULT_LISTEN = "tcp:7878"
#: The largest frame the 24-bit length prefix can describe, in bytes.
MAX_FRAME_SIZE = 16_777_215
#: The smallest fragment size accepted, in bytes (what rsocket-py and rsocket-java accept).
MIN_FRAGMENT_SIZE = 64
#: The smallest max frame size accepted, in bytes (a SETUP frame must fit).
MIN_FRAME_SIZE = 64


@dataclass(frozen=True)
class ServerSettings:
    """Validated server settings, built by :func:`parse_server_settings`.

    :ivar listen: endpoint descriptions or URIs to listen on (at least one).
    :ivar responder: the ``module:Class`` the responder was loaded from (``None``: the demo).
    :ivar responder_factory: the :class:`~rsocket_tx.responder.Responder` subclass to serve;
        one instance per connection.
    :ivar responder_args: ``(key, value)`` string pairs (``--responder-arg KEY=VALUE``), passed
        as keyword arguments to the responder class for each connection (see
        :meth:`make_responder_factory`).
    :ivar fragment_size: the largest frame sent before payloads are fragmented, in bytes (>= 64;
        ``None``: fragment only beyond the max frame size).
    :ivar max_frame_size: the largest frame accepted, in bytes (64 .. 16 777 215).
    :ivar max_reassembled_size: the largest payload reassembled from fragments, in bytes.
    :ivar setup_timeout: how long a new connection may take to send SETUP, in milliseconds.
    :ivar min_keepalive_interval: the smallest keepalive interval a client may ask for in SETUP,
        in milliseconds (0: no limit); a smaller one is refused with ERROR[UNSUPPORTED_SETUP].
    :ivar max_lifetime_limit: the largest max lifetime a client may ask for in SETUP, in
        milliseconds (0: no limit; default 600,000); a larger one is refused with
        ERROR[UNSUPPORTED_SETUP].
    :ivar max_setup_frame_size: the largest first frame (SETUP or RESUME) accepted, in bytes
        (64 .. 16 777 215; default 131,072); a larger length prefix is refused with
        ERROR[INVALID_SETUP] before its body is read.
    :ivar max_reassembly_buffer_size: bytes one connection may hold in unfinished
        reassemblies across all its streams (>= 1; default 64 MiB).
    :ivar max_connections: connections open at once (>= 1; default 4,096); past it new
        connections are closed at once.
    :ivar max_concurrent_streams: streams one client may have open towards the server at once
        (>= 1); a request past it is answered with ERROR[REJECTED].
    :ivar max_send_buffer_size: bytes queued for a client that does not read before its
        connection is aborted (>= 1).
    :ivar drain_timeout: milliseconds open streams get to finish in a graceful close (on
        stop, e.g. SIGTERM, or a client's ERROR[CONNECTION_CLOSE]) before the connection is
        closed anyway (>= 0; 0: close at once).
    :ivar resume: accept resumable sessions (SETUP with R, RESUME; spec §Resuming Operation).
    :ivar resume_session_timeout: milliseconds a session whose transport was lost waits for
        RESUME (>= 1).
    :ivar max_resume_buffer_size: bytes of sent frames a session keeps for resending (>= 1).
    :ivar max_resume_sessions: resumable sessions kept at once (>= 1).
    :ivar lease_ttl: with ``lease_requests``: a fixed-rate lease policy grants each client
        that asks for leases (SETUP L flag) ``lease_requests`` requests per ``lease_ttl``
        milliseconds (1 .. 2^31-1); ``None``: no fixed-rate policy.
    :ivar lease_requests: requests per lease (0 .. 2^31-1), with ``lease_ttl``.
    :ivar lease_interval: milliseconds between two LEASE frames of the fixed-rate policy
        (``None``: ``lease_ttl``).
    :ivar lease_policy: the ``module:Name`` of the application's
        :class:`~rsocket_tx.lease.LeasePolicy` (a subclass, built with no arguments, or an
        instance), or ``None``.
    :ivar lease_grace: milliseconds a grant stays valid past its time-to-live (>= 0).
    :ivar debug: log every frame sent and received (twisted.logger, level debug).
    """

    listen: tuple[str, ...] = (DEFAULT_LISTEN,)
    responder: str | None = None
    responder_factory: type[Responder] | None = None
    responder_args: tuple[tuple[str, str], ...] = ()
    fragment_size: int | None = None
    max_frame_size: int = MAX_FRAME_SIZE
    max_reassembled_size: int = 67_108_864
    setup_timeout: int = 30_000
    min_keepalive_interval: int = 0
    max_lifetime_limit: int = DEFAULT_MAX_LIFETIME_LIMIT
    max_setup_frame_size: int = DEFAULT_MAX_SETUP_FRAME_SIZE
    max_reassembly_buffer_size: int = DEFAULT_MAX_REASSEMBLY_BUFFER_SIZE
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_concurrent_streams: int = DEFAULT_MAX_CONCURRENT_STREAMS
    max_send_buffer_size: int = DEFAULT_MAX_SEND_BUFFER_SIZE
    drain_timeout: int = DEFAULT_DRAIN_TIMEOUT
    resume: bool = False
    resume_session_timeout: int = DEFAULT_RESUME_SESSION_TIMEOUT
    max_resume_buffer_size: int = DEFAULT_MAX_RESUME_BUFFER_SIZE
    max_resume_sessions: int = DEFAULT_MAX_RESUME_SESSIONS
    lease_ttl: int | None = None
    lease_requests: int | None = None
    lease_interval: int | None = None
    lease_policy: str | None = None
    lease_policy_factory: Callable | None = None
    lease_grace: int = DEFAULT_LEASE_GRACE
    debug: bool = False

    def make_responder_factory(self, cls: type[Responder] | None = None) -> Callable:
        """The zero-argument callable making one responder per connection: ``cls`` (default:
        :attr:`responder_factory`, else the demo responder) called with :attr:`responder_args`
        as keyword arguments."""
        if cls is None:
            from ..apps.demo import DemoResponder

            cls = self.responder_factory or DemoResponder
        if not self.responder_args:
            return cls
        return functools.partial(cls, **dict(self.responder_args))

    def connection_config(self) -> ConnectionConfig:
        """The one :class:`~rsocket_tx.core.config.ConnectionConfig` these settings describe
        (its server fields, :data:`~rsocket_tx.protocol.SERVER_SETTINGS`), which the server
        factory gets.

        :raises ValueError: a setting is out of the range ``ConnectionConfig`` allows.
        """
        from ..protocol import SERVER_SETTINGS

        return ConnectionConfig(**{name: getattr(self, name) for name in SERVER_SETTINGS})

    def make_lease_policy(self):
        """The :class:`~rsocket_tx.lease.LeasePolicy` these settings describe: the one of
        ``--lease-policy``, a :class:`~rsocket_tx.lease.FixedRateLeasePolicy` for
        ``--lease-ttl``/``--lease-requests``, or ``None`` (clients asking for leases get
        unlimited ones)."""
        if self.lease_policy_factory is not None:
            return self.lease_policy_factory()
        if self.lease_ttl is not None:
            from ..core.lease import FixedRateLeasePolicy

            assert self.lease_requests is not None  # (parse_server_settings: both or neither)
            return FixedRateLeasePolicy(self.lease_ttl, self.lease_requests,
                                        self.lease_interval)
        return None


@dataclass(frozen=True)
class ServerFlag:
    """One server option without a value (a switch), shared by both faces.

    :ivar name: the long option name, without ``--``.
    :ivar attr: the :class:`ServerSettings` attribute / :func:`parse_server_settings` argument.
    :ivar help: the help text.
    """

    name: str
    attr: str
    help: str


#: The switches of the server faces (besides ``--debug``).
SERVER_FLAGS: tuple[ServerFlag, ...] = (
    ServerFlag(
        "resume",
        "resume",
        "accept resumable sessions (SETUP with the R flag): a client whose connection breaks"
        " reconnects, sends RESUME and its streams go on (default: refused with"
        " ERROR[REJECTED_SETUP])",
    ),
)


@dataclass(frozen=True)
class ServerOption:
    """One server option with a value, shared by ``twistd rsocket`` and ``rsocket-tx serve``.

    :ivar name: the long option name, without ``--``.
    :ivar attr: the :class:`ServerSettings` attribute / :func:`parse_server_settings` argument.
    :ivar metavar: the value's placeholder in the help.
    :ivar help: the help text (says the unit and the default).
    :ivar aliases: more long names (``rsocket-tx`` only; twistd options have one name).
    :ivar repeatable: the option may be given several times; the face collects the values in a
        list (argparse ``action="append"``), in the order given.
    """

    name: str
    attr: str
    metavar: str
    help: str
    aliases: tuple[str, ...] = ()
    repeatable: bool = False


#: The options with a value of the server faces (``--listen`` and ``--debug`` are handled by
#: each face: twistd repeats ``--listen``, ``rsocket-tx serve`` takes positional endpoints).
SERVER_OPTIONS: tuple[ServerOption, ...] = (
    ServerOption(
        "responder",
        "responder",
        "MODULE:CLASS",
        "the Responder subclass to serve, as package.module:Class (default: the demo responder,"
        " rsocket_tx.apps.demo:DemoResponder)",
    ),
    ServerOption(
        "responder-arg",
        "responder_args",
        "KEY=VALUE",
        "a keyword argument (a string) for the --responder class, which is called with them for"
        " each connection (e.g. --responder rsocket_tx.apps.streamlog:StreamLogResponder"
        " --responder-arg path=/var/lib/rsocket/log.db); repeat for several; the class is"
        " called once at start-up to check them",
        repeatable=True,
    ),
    ServerOption(
        "fragment-size",
        "fragment_size",
        "BYTES",
        f"fragment payloads so no frame sent is larger than BYTES (>= {MIN_FRAGMENT_SIZE};"
        " default: no fragmentation below the max frame size)",
        aliases=("fragment",),
    ),
    ServerOption(
        "max-frame-size",
        "max_frame_size",
        "BYTES",
        f"largest frame accepted ({MIN_FRAME_SIZE}..{MAX_FRAME_SIZE}; default {MAX_FRAME_SIZE})",
    ),
    ServerOption(
        "max-reassembled-size",
        "max_reassembled_size",
        "BYTES",
        "largest payload reassembled from fragments (default 67108864)",
    ),
    ServerOption(
        "setup-timeout",
        "setup_timeout",
        "MS",
        "milliseconds a new connection has to send SETUP (default 30000)",
    ),
    ServerOption(
        "min-keepalive-interval",
        "min_keepalive_interval",
        "MS",
        "refuse clients whose SETUP asks for a keepalive interval below MS milliseconds"
        " (ERROR[UNSUPPORTED_SETUP]; default 0: no limit)",
    ),
    ServerOption(
        "max-lifetime-limit",
        "max_lifetime_limit",
        "MS",
        "refuse clients whose SETUP asks for a max lifetime above MS milliseconds"
        f" (ERROR[UNSUPPORTED_SETUP]; 0: no limit; default {DEFAULT_MAX_LIFETIME_LIMIT})",
    ),
    ServerOption(
        "max-setup-frame-size",
        "max_setup_frame_size",
        "BYTES",
        "largest first frame (SETUP or RESUME) accepted; a larger one is refused with"
        " ERROR[INVALID_SETUP] before it is read"
        f" ({MIN_FRAME_SIZE}..{MAX_FRAME_SIZE}; default {DEFAULT_MAX_SETUP_FRAME_SIZE})",
    ),
    ServerOption(
        "max-reassembly-buffer-size",
        "max_reassembly_buffer_size",
        "BYTES",
        "bytes one connection may hold in unfinished fragmented payloads across all its"
        " streams; a stream past it is refused (ERROR[REJECTED] or ERROR[CANCELED]), the"
        f" connection stays up (default {DEFAULT_MAX_REASSEMBLY_BUFFER_SIZE})",
    ),
    ServerOption(
        "max-connections",
        "max_connections",
        "N",
        "connections open at once; past it new connections are closed at once and the log"
        f" says so (default {DEFAULT_MAX_CONNECTIONS})",
    ),
    ServerOption(
        "max-concurrent-streams",
        "max_concurrent_streams",
        "N",
        "streams one client may have open at once; more requests are answered with"
        f" ERROR[REJECTED] (default {DEFAULT_MAX_CONCURRENT_STREAMS})",
    ),
    ServerOption(
        "max-send-buffer-size",
        "max_send_buffer_size",
        "BYTES",
        "bytes queued for a client that does not read before its connection is aborted"
        f" (default {DEFAULT_MAX_SEND_BUFFER_SIZE})",
    ),
    ServerOption(
        "drain-timeout",
        "drain_timeout",
        "MS",
        "milliseconds open streams get to finish in a graceful close (on SIGTERM, or a"
        " client's ERROR[CONNECTION_CLOSE]) before the connection closes anyway"
        f" (0: at once; default {DEFAULT_DRAIN_TIMEOUT})",
    ),
    ServerOption(
        "resume-session-timeout",
        "resume_session_timeout",
        "MS",
        "with --resume: milliseconds a session whose connection broke waits for the client's"
        f" RESUME (default {DEFAULT_RESUME_SESSION_TIMEOUT})",
    ),
    ServerOption(
        "max-resume-buffer-size",
        "max_resume_buffer_size",
        "BYTES",
        "with --resume: bytes of sent frames each session keeps for resending; a resume that"
        " needs more is refused with ERROR[REJECTED_RESUME]"
        f" (default {DEFAULT_MAX_RESUME_BUFFER_SIZE})",
    ),
    ServerOption(
        "max-resume-sessions",
        "max_resume_sessions",
        "N",
        "with --resume: resumable sessions kept at once; more are refused with"
        f" ERROR[REJECTED_SETUP] (default {DEFAULT_MAX_RESUME_SESSIONS})",
    ),
    ServerOption(
        "lease-ttl",
        "lease_ttl",
        "MS",
        "with --lease-requests: grant each client that asks for leases (SETUP L flag)"
        " --lease-requests requests per MS milliseconds; requests past the grant are answered"
        " with ERROR[REJECTED] (default: unlimited leases)",
    ),
    ServerOption(
        "lease-requests",
        "lease_requests",
        "N",
        "with --lease-ttl: requests each lease allows (0 stops all requests)",
    ),
    ServerOption(
        "lease-interval",
        "lease_interval",
        "MS",
        "with --lease-ttl: milliseconds between LEASE frames (default: the --lease-ttl; shorter"
        " renews each lease before it expires)",
    ),
    ServerOption(
        "lease-policy",
        "lease_policy",
        "MODULE:NAME",
        "the application's lease policy for clients that ask for leases: a"
        " rsocket_tx.lease.LeasePolicy subclass (built with no arguments) or instance, as"
        " package.module:Name (instead of --lease-ttl/--lease-requests)",
    ),
    ServerOption(
        "lease-grace",
        "lease_grace",
        "MS",
        "milliseconds a lease stays valid past its time-to-live, for the requests in flight"
        f" (default {DEFAULT_LEASE_GRACE})",
    ),
)

DEBUG_HELP = "log every frame sent and received, decoded (twisted.logger, level debug)"
LISTEN_HELP = (
    "endpoint to listen on: a Twisted endpoint description (tcp:7878,"
    " tcp:port=7878:interface=127.0.0.1, unix:/path) or a URI (tcp://0.0.0.0:7878, tcp://:7878);"
    f" repeat to listen on several (default {DEFAULT_LISTEN})"
)


# -- validation ------------------------------------------------------------------------------


def parse_fragment_size(value) -> int | None:
    """Validate a fragment size.

    :param value: ``None`` (no fragmentation), or an int or decimal string, in bytes.
    :returns: the size in bytes, or ``None``.
    :raises SettingsError: if it is not an integer or not in 64 .. 16 777 215.
    """
    return parse_int_option(
        "fragment-size", value, minimum=MIN_FRAGMENT_SIZE, maximum=MAX_FRAME_SIZE, unit="bytes"
    )


def check_listen(spec: str) -> str:
    """Check that ``spec`` parses as a server endpoint, without a reactor.

    :param spec: an endpoint description or URI.
    :returns: ``spec``.
    :raises SettingsError: if it cannot be parsed.
    """
    return check_endpoint(spec, server_endpoint)


def load_responder(spec: str) -> type:
    """Import the responder class named ``spec``.

    :param spec: ``package.module:Class`` (``Class`` may be dotted: ``module:Outer.Inner``);
        ``package.module.Class`` is accepted too.
    :returns: the class, a subclass of :class:`rsocket_tx.responder.Responder`.
    :raises SettingsError: if the module cannot be imported, has no such attribute, or the
        attribute is not a Responder subclass.
    """
    from ..responder import Responder

    return load_class("responder", spec, Responder, "rsocket_tx.Responder")


#: Most ``--responder-arg`` options, and the longest one, in characters.
MAX_RESPONDER_ARGS = 256
MAX_RESPONDER_ARG_LENGTH = 65_536


def parse_responder_args(values) -> tuple[tuple[str, str], ...]:
    """Validate ``--responder-arg KEY=VALUE`` options.

    :param values: ``None`` (none), one ``"KEY=VALUE"`` string, an iterable of them, or a
        mapping of key to value (values are converted with ``str``).
    :returns: ``((key, value), ...)`` in the order given.
    :raises SettingsError: no ``=``, a key that is not a Python identifier (or is a keyword),
        a key given twice, more than 256 options, or an option longer than 65,536 characters.
    """
    if values is None:
        return ()
    if isinstance(values, Mapping):
        items = [f"{key}={value}" for key, value in values.items()]
    elif isinstance(values, str):
        items = [values]
    else:
        items = list(values)
    if len(items) > MAX_RESPONDER_ARGS:
        raise SettingsError(f"--responder-arg: at most {MAX_RESPONDER_ARGS} are accepted, got "
                            f"{len(items)}")
    pairs: dict[str, str] = {}
    for item in items:
        if not isinstance(item, str):
            raise SettingsError(f"--responder-arg: expected KEY=VALUE, got {item!r}")
        if len(item) > MAX_RESPONDER_ARG_LENGTH:
            raise SettingsError(f"--responder-arg: longer than {MAX_RESPONDER_ARG_LENGTH} "
                                f"characters: {item[:40]!r}...")
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep:
            raise SettingsError(f"--responder-arg: expected KEY=VALUE, got {item!r} (no '=')")
        if not key.isidentifier() or keyword.iskeyword(key):
            raise SettingsError(f"--responder-arg: the key must be a Python identifier (a "
                                f"keyword argument name), got {key!r} in {item!r}")
        if key in pairs:
            raise SettingsError(f"--responder-arg: {key} is given twice")
        pairs[key] = value
    return tuple(pairs.items())


def _check_responder_args(name: str, cls, args: tuple[tuple[str, str], ...]) -> None:
    """Check that ``cls`` accepts ``args`` as keyword arguments, by calling it once.

    :raises SettingsError: saying which argument it does not take, or what it raised.
    """
    kwargs = dict(args)
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):  # no signature to check against: the call will tell
        signature = None
    if signature is not None:
        accepted = [p.name for p in signature.parameters.values()
                    if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        try:
            signature.bind(**kwargs)
        except TypeError as e:
            takes = f" (it takes: {', '.join(accepted)})" if accepted else \
                " (it takes no arguments)"
            raise SettingsError(f"--responder-arg: {name}: {e}{takes}") from None
    try:
        cls(**kwargs)
    except Exception as e:
        raise SettingsError(f"--responder-arg: {name} rejected "
                            f"{' '.join(f'{k}={v}' for k, v in args)}: "
                            f"{type(e).__name__}: {e}") from None


def load_lease_policy(spec: str) -> Callable:
    """Import the lease policy named ``spec``.

    :param spec: ``package.module:Name`` (or ``package.module.Name``): a
        :class:`~rsocket_tx.lease.LeasePolicy` subclass, built with no arguments, or an
        instance.
    :returns: a zero-argument callable making the policy (one policy serves every
        connection).
    :raises SettingsError: if it cannot be imported, is not a LeasePolicy, or building it
        fails.
    """
    from ..core.lease import LeasePolicy

    obj = import_named("lease-policy", spec, "Name")
    if isinstance(obj, LeasePolicy):
        policy = obj
        return lambda: policy
    if not (isinstance(obj, type) and issubclass(obj, LeasePolicy)):
        raise SettingsError(f"--lease-policy: {spec!r} is not a rsocket_tx.lease.LeasePolicy "
                            f"subclass or instance (it is {obj!r})")
    try:
        obj()
    except Exception as e:
        raise SettingsError(f"--lease-policy: {spec!r} cannot be built with no arguments: "
                            f"{type(e).__name__}: {e}") from None
    return obj


# The integer options of parse_server_settings, in the order they are checked: (the
# ServerSettings field, which is also the option's name with "_" for "-"; minimum; maximum or
# None; unit). Not given: the ServerSettings default.
_SERVER_INT_OPTIONS = (
    ("max_frame_size", MIN_FRAME_SIZE, MAX_FRAME_SIZE, "bytes"),
    ("max_reassembled_size", 1, None, "bytes"),
    ("setup_timeout", 1, None, "milliseconds"),
    ("min_keepalive_interval", 0, None, "milliseconds"),
    ("max_lifetime_limit", 0, 2**31 - 1, "milliseconds"),
    ("max_setup_frame_size", MIN_FRAME_SIZE, MAX_FRAME_SIZE, "bytes"),
    ("max_reassembly_buffer_size", 1, None, "bytes"),
    ("max_connections", 1, 2**31 - 1, "connections"),
    ("max_concurrent_streams", 1, 2**31 - 1, "streams"),
    ("max_send_buffer_size", 1, None, "bytes"),
    ("drain_timeout", 0, 2**31 - 1, "milliseconds"),
    ("resume_session_timeout", 1, 2**31 - 1, "milliseconds"),
    ("max_resume_buffer_size", 1, None, "bytes"),
    ("max_resume_sessions", 1, 2**31 - 1, "sessions"),
)


def _lease_settings(lease_ttl, lease_requests, lease_interval, lease_policy,
                    lease_grace) -> dict:
    ttl = parse_int_option("lease-ttl", lease_ttl, minimum=1, maximum=2**31 - 1,
                           unit="milliseconds")
    requests = parse_int_option("lease-requests", lease_requests, minimum=0,
                                maximum=2**31 - 1, unit="requests")
    interval = parse_int_option("lease-interval", lease_interval, minimum=1,
                                maximum=2**31 - 1, unit="milliseconds")
    grace = parse_int_option("lease-grace", lease_grace, minimum=0, maximum=2**31 - 1,
                             unit="milliseconds")
    if (ttl is None) != (requests is None):
        given, missing = ("lease-ttl", "lease-requests") if requests is None else \
            ("lease-requests", "lease-ttl")
        raise SettingsError(f"--{given}: needs --{missing} too (a fixed-rate lease grants "
                            "--lease-requests requests per --lease-ttl milliseconds)")
    if interval is not None and ttl is None:
        raise SettingsError("--lease-interval: needs --lease-ttl and --lease-requests")
    factory = None
    if lease_policy is not None:
        if ttl is not None:
            raise SettingsError("--lease-policy: give either --lease-policy or "
                                "--lease-ttl/--lease-requests, not both")
        if isinstance(lease_policy, str):
            factory = load_lease_policy(lease_policy)
        else:
            from ..core.lease import LeasePolicy

            if not isinstance(lease_policy, LeasePolicy):
                raise SettingsError(f"--lease-policy: {lease_policy!r} is not a LeasePolicy")
            policy = lease_policy
            lease_policy = f"{type(policy).__module__}:{type(policy).__qualname__}"
            factory = lambda: policy  # noqa: E731
    return {"lease_ttl": ttl, "lease_requests": requests, "lease_interval": interval,
            "lease_policy": lease_policy, "lease_policy_factory": factory,
            "lease_grace": DEFAULT_LEASE_GRACE if grace is None else grace}


def parse_server_settings(
    *,
    listen: Iterable[str] | None = None,
    responder=None,
    responder_args=None,
    fragment_size=None,
    max_frame_size=None,
    max_reassembled_size=None,
    setup_timeout=None,
    min_keepalive_interval=None,
    max_lifetime_limit=None,
    max_setup_frame_size=None,
    max_reassembly_buffer_size=None,
    max_connections=None,
    max_concurrent_streams=None,
    max_send_buffer_size=None,
    drain_timeout=None,
    resume: bool = False,
    resume_session_timeout=None,
    max_resume_buffer_size=None,
    max_resume_sessions=None,
    lease_ttl=None,
    lease_requests=None,
    lease_interval=None,
    lease_policy=None,
    lease_grace=None,
    debug: bool = False,
) -> ServerSettings:
    """Validate server options as typed on a command line; ``None`` means "not given".

    Numbers may be ints or decimal strings.

    :param listen: endpoint descriptions / URIs (``None`` or empty: ``tcp:7878``).
    :param responder: ``package.module:Class`` or a Responder subclass (``None``: the demo).
    :param responder_args: ``"KEY=VALUE"`` strings (or one, or a mapping): keyword arguments
        of the responder class (see :func:`parse_responder_args`); the class is called once with
        them, to check that it accepts them.
    :param fragment_size: bytes, >= 64 (``None``: no fragmentation below the max frame size).
    :param max_frame_size: bytes, 64 .. 16 777 215.
    :param max_reassembled_size: bytes, >= 1.
    :param setup_timeout: milliseconds, >= 1.
    :param min_keepalive_interval: milliseconds, >= 0 (0: no limit).
    :param max_lifetime_limit: milliseconds, 0 .. 2^31-1 (0: no limit; default 600,000).
    :param max_setup_frame_size: bytes, 64 .. 16 777 215.
    :param max_reassembly_buffer_size: bytes, >= 1.
    :param max_connections: connections, 1 .. 2^31-1.
    :param max_concurrent_streams: streams, 1 .. 2^31-1.
    :param max_send_buffer_size: bytes, >= 1.
    :param drain_timeout: milliseconds, 0 .. 2^31-1 (0: close at once).
    :param resume: accept resumable sessions.
    :param resume_session_timeout: milliseconds, 1 .. 2^31-1.
    :param max_resume_buffer_size: bytes, >= 1.
    :param max_resume_sessions: sessions, 1 .. 2^31-1.
    :param lease_ttl: milliseconds, 1 .. 2^31-1; with ``lease_requests`` (both or neither).
    :param lease_requests: requests, 0 .. 2^31-1.
    :param lease_interval: milliseconds, 1 .. 2^31-1; needs ``lease_ttl``.
    :param lease_policy: ``package.module:Name`` of a LeasePolicy subclass or instance (or the
        policy object itself); not with ``lease_ttl``.
    :param lease_grace: milliseconds, 0 .. 2^31-1.
    :param debug: log every frame.
    :returns: the validated :class:`ServerSettings`.
    :raises SettingsError: (a :class:`ValueError`) naming the first invalid option.
    """
    given = dict(locals())  # the options by name, before any other name is bound
    from ..apps.demo import DemoResponder

    specs = parse_listen(listen, DEFAULT_LISTEN, server_endpoint)

    responder_name: str | None
    responder_factory: type[Responder]
    if responder is None:
        responder_name, responder_factory = None, DemoResponder
    else:
        from ..responder import Responder

        responder_name, responder_factory = named_class("responder", responder, Responder,
                                                        "rsocket_tx.Responder")
    args = parse_responder_args(responder_args)
    if args:
        _check_responder_args(responder_name or "the demo responder", responder_factory, args)

    fragment_size = parse_fragment_size(fragment_size)
    defaults = ServerSettings()
    numbers: dict[str, Any] = {}  # (ints, each for its field of ServerSettings)
    for field, minimum, maximum, unit in _SERVER_INT_OPTIONS:
        number = parse_int_option(field.replace("_", "-"), given[field], minimum=minimum,
                                  maximum=maximum, unit=unit)
        numbers[field] = getattr(defaults, field) if number is None else number

    return ServerSettings(
        listen=specs,
        responder=responder_name,
        responder_factory=responder_factory,
        responder_args=args,
        fragment_size=fragment_size,
        resume=bool(resume),
        **numbers,
        **_lease_settings(lease_ttl, lease_requests, lease_interval, lease_policy,
                          lease_grace),
        debug=bool(debug),
    )


class ResponderArgOption(usage.Options):
    """The repeatable ``--responder-arg KEY=VALUE`` of a twistd ``Options`` whose option table
    holds ``responder-arg`` (:data:`SERVER_OPTIONS`): each value is appended to
    ``self["responder-arg"]`` (a list the subclass's ``__init__`` sets)."""

    def opt_responder_arg(self, value: str) -> None:
        self["responder-arg"].append(value)

    opt_responder_arg.__doc__ = next(o.help for o in SERVER_OPTIONS if o.name == "responder-arg")
