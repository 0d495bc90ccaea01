"""No credential in a ``--debug`` frame log (rsocket_tx.faces.framelog): authentication
metadata (Extensions/Security/Authentication.md: ``simple`` username shown, password masked;
``bearer`` token masked), as the connection's metadata or an entry of composite metadata, in
SETUP or in a request, fragmented or not; and the password of a URI's ``user:password@``.
Driven directly with frames, then through a real server's twisted.logger lines, the CLI's
``--debug`` client lines and an ``rsocket-tx serve --debug`` process.
"""

from __future__ import annotations

import io
import re
import signal

import pytest
import pytest_twisted
from test_cli import SAFETY, _reactor, spawn
from test_server_logging import (
    events,  # noqa: F401 - the fixture
    text,
    until,
)
from twisted_support import wait

from rsocket_tx import Payload, Responder
from rsocket_tx.apps.demo import DemoResponder
from rsocket_tx.core import frames
from rsocket_tx.extensions.auth import BearerAuth, SimpleAuth, encode_auth
from rsocket_tx.extensions.composite import encode_composite
from rsocket_tx.extensions.mimetypes import AUTHENTICATION, COMPOSITE_METADATA, ROUTING
from rsocket_tx.extensions.routing import encode_routing
from rsocket_tx.faces import main as cli
from rsocket_tx.faces.tap import describe_frame, make_frame_logger
from rsocket_tx.reactivesocket import frames as draft_frames

PASSWORD = "pw-Sesame-31"
TOKEN = "tok-Bearer-77"
SIMPLE = encode_auth(SimpleAuth("alice", PASSWORD))
BEARER = encode_auth(BearerAuth(TOKEN))


def composite(*entries) -> bytes:
    return encode_composite([(ROUTING, encode_routing(["orders"])), *entries])


def setup(mime: str, metadata: bytes | None) -> frames.SetupFrame:
    return frames.SetupFrame(keepalive_interval=20_000, max_lifetime=90_000,
                             metadata_mime_type=mime.encode(),
                             data_mime_type=b"application/octet-stream", metadata=metadata)


def assert_no_secret(log: str) -> None:
    for secret in (PASSWORD, TOKEN):
        for part in (secret, secret[:6], secret[-6:]):
            assert part not in log, log


def connection_lines(frames_sent) -> list[str]:
    """What ``make_frame_logger(emit)`` writes for one connection's ``(direction, frame)``."""
    lines: list[str] = []
    logger = make_frame_logger(lines.append).for_connection(None)
    for direction, frame in frames_sent:
        logger(direction, frame)
    return lines


# ------------------------------------------------------------------------------ frames


def test_simple_and_bearer_in_setup_and_in_composite_request_metadata_are_masked():
    lines = connection_lines([
        ("send", setup(COMPOSITE_METADATA, composite((AUTHENTICATION, SIMPLE)))),
        ("send", frames.RequestResponseFrame(stream_id=1, data=b"hi",
                                             metadata=composite((AUTHENTICATION, BEARER)))),
        ("send", frames.MetadataPushFrame(metadata=encode_composite([(AUTHENTICATION,
                                                                      SIMPLE)]))),
    ])
    log = "\n".join(lines)
    assert_no_secret(log)
    assert ("metadata=composite[message/x.rsocket.routing.v0:b'\\x06orders', "
            "auth:simple(username='alice', password=***)]") in lines[0]
    assert "auth:bearer(token=***)" in lines[1] and "data=b'hi'" in lines[1]
    assert "auth:simple(username='alice', password=***)" in lines[2]


def test_authentication_as_the_connections_metadata_mime_type_is_masked():
    lines = connection_lines([
        ("recv", setup(AUTHENTICATION, SIMPLE)),
        ("recv", frames.RequestStreamFrame(stream_id=1, initial_request_n=8, metadata=BEARER)),
        ("recv", frames.RequestStreamFrame(stream_id=3, initial_request_n=8, metadata=b"\x00")),
    ])
    assert_no_secret("\n".join(lines))
    assert "metadata=auth:simple(username='alice', password=***)" in lines[0]
    assert "metadata=auth:bearer(token=***)" in lines[1]
    assert "metadata=<1 bytes: not valid authentication metadata, not shown>" in lines[2]


def test_metadata_that_does_not_parse_or_is_a_fragment_is_shown_by_length_only():
    truncated = composite((AUTHENTICATION, SIMPLE))[:-3] + b"\x00\x00\x00\x09"
    whole = composite((AUTHENTICATION, SIMPLE))
    lines = connection_lines([
        ("send", setup(COMPOSITE_METADATA, None)),
        ("send", frames.RequestResponseFrame(stream_id=1, metadata=truncated)),
        # a request fragmented in the middle of its credentials: FOLLOWS, then its rest
        ("send", frames.RequestResponseFrame(stream_id=3, metadata=whole[:20], follows=True)),
        ("send", frames.PayloadFrame(stream_id=3, metadata=whole[20:], next=True)),
        ("send", frames.RequestResponseFrame(stream_id=5, metadata=composite())),
    ])
    assert_no_secret("\n".join(lines))
    assert f"metadata=<{len(truncated)} bytes: not valid composite metadata, not shown>" \
        in lines[1]
    assert "metadata=<20 bytes of a fragment, not shown>" in lines[2]
    assert f"metadata=<{len(whole) - 20} bytes of a fragment, not shown>" in lines[3]
    # the stream's fragments are over: a composite without credentials is shown as bytes
    assert "metadata=b'\\xfe\\x00\\x00\\x07\\x06orders'" in lines[4]


def test_other_metadata_mime_types_are_shown_and_uri_passwords_are_masked():
    lines = connection_lines([
        ("send", setup("application/json", b'{"a": 1}')),
        ("send", frames.RequestResponseFrame(stream_id=1, data=b"go to tcp://bob:hunter2@h:1",
                                             metadata=b'{"to": "ws://u:s3cr3t@h/x"}')),
    ])
    assert "metadata=b'{\"a\": 1}'" in lines[0]
    assert "data=b'go to tcp://bob:***@h:1'" in lines[1]
    assert "ws://u:***@h/x" in lines[1]
    assert "hunter2" not in lines[1] and "s3cr3t" not in lines[1]
    from rsocket_tx.faces.framelog import mask_uri_passwords

    assert mask_uri_passwords("tcp://bob:hunter2@h:1 and tcp://h:2") == \
        "tcp://bob:***@h:1 and tcp://h:2"


def test_a_logger_with_no_setup_still_masks_composite_authentication():
    """A plain call (no connection, no SETUP seen): composite metadata that parses has its
    authentication masked."""
    lines: list[str] = []
    make_frame_logger(lines.append)(
        "send", frames.RequestResponseFrame(stream_id=1,
                                            metadata=composite((AUTHENTICATION, SIMPLE))))
    assert_no_secret(lines[0])
    assert "auth:simple(username='alice', password=***)" in lines[0]
    assert describe_frame(frames.RequestResponseFrame(
        stream_id=1, metadata=composite((AUTHENTICATION, BEARER)))).count("token=***") == 1


def test_the_2015_drafts_frames_are_masked_too():
    """The draft has no auth extension, but a client may send RSocket-style composite
    metadata with credentials in its SETUP and requests."""
    lines = connection_lines([
        ("recv", draft_frames.SetupFrame(metadata_mime_type=COMPOSITE_METADATA.encode(),
                                         data_mime_type=b"text/plain",
                                         metadata=composite((AUTHENTICATION, SIMPLE)))),
        ("recv", draft_frames.RequestResponseFrame(stream_id=1, data=b"x",
                                                   metadata=composite((AUTHENTICATION,
                                                                       BEARER)))),
    ])
    assert_no_secret("\n".join(lines))
    assert "username='alice'" in lines[0] and "auth:bearer(token=***)" in lines[1]


# ------------------------------------------------------------------ a real server's log


@pytest_twisted.ensureDeferred
async def test_a_servers_frame_log_shows_the_username_but_no_password_or_token(harness, events):  # noqa: F811
    port = await harness.serve(frame_logger=make_frame_logger())
    rs = await harness.connect(port, metadata_mime_type=COMPOSITE_METADATA,
                               auth=SimpleAuth("alice", PASSWORD))
    answer = await wait(rs.request_response(Payload(b"hi"), route="r", auth=BearerAuth(TOKEN)))
    assert answer.data == b"hi"
    lines = [text(e) for e in events if e.get("log_namespace") == "rsocket_tx.frames"]
    setup_line = next(line for line in lines if "recv SETUP" in line)
    request_line = next(line for line in lines if "recv REQUEST_RESPONSE" in line)
    assert "auth:simple(username='alice', password=***)" in setup_line
    assert "auth:bearer(token=***)" in request_line
    assert_no_secret("\n".join(text(e) for e in events))


# ------------------------------------------------------------------------------ the CLI


@pytest_twisted.ensureDeferred
async def test_the_cli_debug_lines_mask_credentials_it_was_not_told_of(tmp_path, harness):
    """Credentials in ``--setup-metadata`` / ``--metadata`` files are not command-line
    secrets: the CLI's ``redact`` cannot know them, the frame log decodes and masks them."""
    (tmp_path / "setup.bin").write_bytes(composite((AUTHENTICATION, SIMPLE)))
    (tmp_path / "request.bin").write_bytes(composite((AUTHENTICATION, BEARER)))
    port = await harness.serve()
    stdout, stderr = io.BytesIO(), io.StringIO()
    status = await cli.run(_reactor(), [
        "request", f"tcp://127.0.0.1:{port}", "-d", "hi", "--debug",
        "--metadata-mime", COMPOSITE_METADATA,
        "--setup-metadata", f"@{tmp_path / 'setup.bin'}",
        "--metadata", f"@{tmp_path / 'request.bin'}",
    ], stdin=io.BytesIO(b""), stdout=stdout, stderr=stderr).addTimeout(SAFETY, _reactor())
    log = stderr.getvalue()
    assert status == 0, log
    assert_no_secret(log)
    assert re.search(r"send SETUP .*auth:simple\(username='alice', password=\*\*\*\)", log)
    assert re.search(r"send REQUEST_RESPONSE .*auth:bearer\(token=\*\*\*\)", log)


@pytest_twisted.ensureDeferred
async def test_rsocket_tx_serve_debug_logs_no_clients_password(harness):
    from rsocket_tx import connect

    process = spawn(["serve", "tcp:0:interface=127.0.0.1", "--debug"], stdin=None,
                    pattern=re.compile(rb"listening on 127\.0\.0\.1:(\d+)"))
    try:
        match = await process.matched.addTimeout(SAFETY, _reactor())
        rsocket = await connect(f"tcp://127.0.0.1:{int(match.group(1))}", reactor=_reactor(),
                                metadata_mime_type=COMPOSITE_METADATA,
                                auth=SimpleAuth("alice", PASSWORD))
        try:
            answer = await rsocket.request_response(Payload(b"ping"), auth=BearerAuth(TOKEN))
            assert answer.data == b"ping"
        finally:
            await rsocket.close()
    finally:
        if not process.ended.called:
            process.transport.signalProcess(signal.SIGTERM)
        code = await process.ended.addTimeout(SAFETY, _reactor())
    log = process.stderr.decode()
    assert code == 0, log
    assert "recv REQUEST_RESPONSE" in log and "username='alice'" in log
    assert "auth:bearer(token=***)" in log
    assert_no_secret(log)



# ------------------------------------------------- what responders log at level info


class Unhandled(Responder):
    pass


@pytest.mark.parametrize("responder", [Unhandled, DemoResponder])
@pytest_twisted.ensureDeferred
async def test_unhandled_and_demo_info_lines_mask_credentials(harness, events, responder):  # noqa: F811
    """The base Responder logs a fire-and-forget and a metadata-push it does not handle, and
    the demo logs every one, at level info: a client's credentials in their metadata (its
    own authentication metadata or a composite entry) are masked there too."""
    rs = await harness.connect(await harness.serve(responder))
    await wait(rs.fire_and_forget(Payload(b"note", composite((AUTHENTICATION, SIMPLE)))))
    await wait(rs.fire_and_forget(Payload(b"note2", BEARER)))
    await wait(rs.metadata_push(composite((AUTHENTICATION, BEARER))))
    await until(lambda: len(info_lines(events)) >= 3)
    lines = "\n".join(info_lines(events))
    assert_no_secret(lines)
    assert "auth:simple(username='alice', password=***)" in lines
    assert lines.count("token=***") == 2
    assert "b'note'" in lines and "b'note2'" in lines


def info_lines(logged) -> list[str]:
    return [text(e) for e in logged
            if "fire-and-forget" in text(e) or "metadata-push" in text(e)]
