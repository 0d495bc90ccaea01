"""One payload grammar for every ``rsocket-tx`` client command, whatever the protocol: the data
as ``DATA`` (positional), ``-d``/``--data`` or ``-f``/``--data-file``, in the forms ``TEXT``,
``@FILE``, ``-`` (standard input) and ``@@TEXT``; ``-m``/``--metadata`` where the protocol has
metadata. Each command runs in process (:func:`rsocket_tx.faces.main.run`) against a real
server of its protocol on loopback that echoes what it receives."""

from __future__ import annotations

import json

import pytest
import pytest_twisted
from twisted.internet import defer, reactor
from twisted_support import run_command

from rsocket_tx.faces.cli import EXIT_OK, EXIT_USAGE

aio = pytest_twisted.ensureDeferred
WAIT = 60  # seconds: only so that a broken test fails instead of hanging


async def _rsocket() -> tuple[str, object]:
    from rsocket_tx import serve
    from rsocket_tx.apps.demo import DemoResponder

    port = await serve("tcp:0:interface=127.0.0.1", DemoResponder, reactor=reactor)
    return f"tcp://127.0.0.1:{port.getHost().port}", port.stopListening


async def _jini() -> tuple[str, object]:
    from rsocket_tx.jini import EchoDispatcher, serve

    port = await serve(reactor, "jini+tcp://127.0.0.1:0", EchoDispatcher)

    async def stop() -> None:
        await port.stopListening()
        await port.factory.close_connections()
    return f"jini+tcp://127.0.0.1:{port.getHost().port}", stop


async def _rsnet() -> tuple[str, object]:
    from rsocket_tx.rsnet.demo import DemoPublisher
    from rsocket_tx.rsnet.server import serve

    port = await serve(reactor, "rsnet+tcp://127.0.0.1:0", DemoPublisher())

    async def stop() -> None:
        await port.stopListening()
        await defer.DeferredList([p.close() for p in list(port.factory.protocols)])
    return f"rsnet+tcp://127.0.0.1:{port.getHost().port}", stop


async def _rs2015() -> tuple[str, object]:
    from rsocket_tx.apps.demo import DemoResponder
    from rsocket_tx.reactivesocket import ReactiveSocketServerFactory
    from rsocket_tx.reactivesocket.client import server_endpoint

    factory = ReactiveSocketServerFactory(DemoResponder)
    port = await server_endpoint(reactor, "rs2015+tcp://127.0.0.1:0").listen(factory)

    async def stop() -> None:
        await factory.close_connections(0)
        await port.stopListening()
    return f"rs2015+tcp://127.0.0.1:{port.getHost().port}", stop


#: name: (start a server of the protocol, the command before the payload arguments)
COMMANDS = {
    "rsocket request": (_rsocket, lambda where: ["request", where]),
    "rsocket channel": (_rsocket, lambda where: ["channel", where]),
    "jini request": (_jini, lambda where: ["jini", "request", where]),
    "rsnet publish": (_rsnet, lambda where: ["rsnet", "publish", where, "lines"]),
    "rs2015 request": (_rs2015, lambda where: ["rs2015", "request", where]),
}
#: the commands of the protocols that have metadata
WITH_METADATA = ("rsocket request", "rsocket channel", "rs2015 request")


@pytest_twisted.async_yield_fixture(params=sorted(COMMANDS))
async def command(request):
    """``(name, argv before the payload arguments)`` of a client command whose server (of its
    protocol, on loopback) echoes the data."""
    start, argv = COMMANDS[request.param]
    where, stop = await start()
    try:
        yield request.param, argv(where)
    finally:
        await defer.ensureDeferred(stop()).addTimeout(WAIT, reactor)


@pytest.fixture
def files(tmp_path):
    """``{name: path}`` of files with the contents ``from a file`` and ``meta from a file``."""
    paths = {"data": tmp_path / "data.txt", "metadata": tmp_path / "meta.bin"}
    paths["data"].write_bytes(b"from a file")
    paths["metadata"].write_bytes(b"meta from a file")
    return {name: str(path) for name, path in paths.items()}


#: (payload arguments, standard input, the data the server must receive)
FORMS = [
    (["grammar test"], b"", b"grammar test"),  # DATA
    (["-d", "grammar test"], b"", b"grammar test"),
    (["--data", "grammar test"], b"", b"grammar test"),
    (["-d", "@{data}"], b"", b"from a file"),
    (["--data", "-"], b"from stdin", b"from stdin"),
    (["-d", "@@not a file"], b"", b"@not a file"),
    (["@{data}"], b"", b"from a file"),  # DATA takes the same forms
    (["-"], b"from stdin", b"from stdin"),
    (["-f", "{data}"], b"", b"from a file"),
    (["--data-file", "-"], b"from stdin", b"from stdin"),
]


@pytest.mark.parametrize(("arguments", "stdin", "data"), FORMS,
                         ids=[" ".join(form[0]) for form in FORMS])
@aio
async def test_every_command_takes_the_data_the_same_way(command, files, arguments, stdin,
                                                         data):
    name, argv = command
    arguments = [a.format(**files) for a in arguments]
    result = await run_command([*argv, *arguments], stdin=stdin)
    assert (result.status, result.err) == (EXIT_OK, ""), name
    assert result.out == data + b"\n", name


@aio
async def test_no_data_is_empty_data_or_standard_input_the_same_way(command):
    name, argv = command
    result = await run_command(argv, stdin=b"one\ntwo\n")
    if name in ("rsocket channel", "rsnet publish"):  # a stream of lines: standard input
        assert (result.status, result.out) == (EXIT_OK, b"one\ntwo\n"), result.err
    else:  # one payload: empty (not standard input), echoed
        # (the 2015 draft answers an empty payload with a bare COMPLETE: no response payload)
        echoed = b"" if name == "rs2015 request" else b"\n"
        assert (result.status, result.out) == (EXIT_OK, echoed), result.err


@pytest.mark.parametrize("arguments", [
    ["text", "-d", "text"],
    ["-d", "text", "--data-file", "f"],
    ["text", "-f", "f"],
])
@aio
async def test_the_data_given_twice_is_the_same_usage_error_everywhere(command, arguments):
    name, argv = command
    result = await run_command([*argv, *arguments])
    assert result.status == EXIT_USAGE, name
    assert "give the data once: as DATA, with --data or with --data-file" in result.err, name
    assert result.err.startswith("usage: rsocket-tx "), name


@aio
async def test_metadata_where_the_protocol_has_it(command, files):
    name, argv = command
    result = await run_command([*argv, "-d", "d", "-m", f"@{files['metadata']}", "-o", "json"])
    if name in WITH_METADATA:
        assert result.status == EXIT_OK, result.err
        assert json.loads(result.out) == {"data": "d", "metadata": "meta from a file"}
        result = await run_command([*argv, "-d", "-", "--metadata", "-"])
        assert result.status == EXIT_USAGE, name
        assert "only one option can read standard input" in result.err, name
    else:
        assert result.status == EXIT_USAGE, name
        assert "unrecognized arguments: -m" in result.err, name
