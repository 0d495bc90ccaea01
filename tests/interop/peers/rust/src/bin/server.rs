//! rsocket-rust 0.7.5 interop server: the demo responder over TCP or WebSocket.
//!
//! ```text
//! server [--host 127.0.0.1] [--port P] [--fragment N] [--completion frame] [--timeout S]
//!        [--watch-stdin] [--transport tcp|ws] [--path /P]
//! ```
//!
//! Prints `LISTENING <port>` once bound, then one JSON event per line (`../README.md`, "Server
//! events").  Each accepted socket gets its own `RSocketFactory::receive()` server (a one-shot
//! `ServerTransport`), so the acceptor and the responder of a connection share that
//! connection's wire tap.  `--fragment N`: `ServerBuilder::fragment(N)` (N >= 64).
//! `--completion flag` and `--request-n K` (other than 2^31-1) exit with code 3: the library
//! always ends streams and channels with a separate PAYLOAD[C] and always grants a channel
//! 2^31-1.  `--path` is accepted and ignored: the library's WebSocket server (tokio-tungstenite
//! `accept_async`) answers any path.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rsocket_rust::frame::{Body, Frame};
use rsocket_rust::prelude::*;
use rsocket_rust::transport::ServerTransport;
use rsocket_rust::{async_trait, stream};
use rsocket_rust_transport_tcp::TcpClientTransport;
use rsocket_rust_transport_websocket::WebsocketClientTransport;
use rsocket_tx_interop_rust_peer::*;
use serde_json::{json, Value};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

/// What the tap saw on one connection that the library does not tell the responder.
#[derive(Default)]
struct Wire {
    /// interaction of each request stream id ("request-stream", "request-channel")
    kinds: HashMap<u32, &'static str>,
    /// channels in REQUEST_CHANNEL order, not yet taken by an echo
    unclaimed: VecDeque<u32>,
    channels: HashMap<u32, ChannelWire>,
    /// stream id -> N seen on an earlier fragment of the payload being reassembled
    fragment_next: HashMap<u32, bool>,
}

#[derive(Default)]
struct ChannelWire {
    /// C on REQUEST_CHANNEL
    initial_complete: bool,
    /// C of each inbound PAYLOAD with N after the first payload, in order
    nexts: VecDeque<bool>,
    /// how the inbound side completed: "flag" (C with N) or "frame" (PAYLOAD with only C)
    form: Option<&'static str>,
}

type Shared = Arc<Mutex<Wire>>;

fn interaction_of(wire: &Shared, sid: u32) -> &'static str {
    wire.lock().unwrap().kinds.get(&sid).copied().unwrap_or("unknown")
}

/// The tap's side of the events: `setup` (the whole SETUP frame), `request_n` (from
/// REQUEST_STREAM/REQUEST_CHANNEL and REQUEST_N: the library never hands credit to the
/// application), `error` (ERROR on stream 0, which the library drops), plus the channel facts
/// kept in [`Wire`].
fn on_recv(wire: &Shared, frame: &Frame) {
    let sid = frame.get_stream_id();
    match frame.get_body_ref() {
        Body::Setup(setup) => {
            let version = setup.get_version();
            emit(payload_event(
                "setup",
                setup.get_data().map(|b| b.as_ref()),
                setup.get_metadata().map(|b| b.as_ref()),
                json!({
                    "version": [version.get_major(), version.get_minor()],
                    "keepalive": setup.get_keepalive().as_millis() as u64,
                    "lifetime": setup.get_lifetime().as_millis() as u64,
                    "data_mime_type": setup.get_mime_data().unwrap_or(""),
                    "metadata_mime_type": setup.get_mime_metadata().unwrap_or(""),
                    "lease": has(frame, Frame::FLAG_LEASE),
                    "resume": has(frame, Frame::FLAG_RESUME),
                }),
            ));
        }
        Body::RequestStream(request) => {
            wire.lock().unwrap().kinds.insert(sid, "request-stream");
            emit(json!({"event": "request_n", "interaction": "request-stream",
                        "n": request.get_initial_request_n(), "initial": true}));
        }
        Body::RequestChannel(request) => {
            {
                let mut w = wire.lock().unwrap();
                w.kinds.insert(sid, "request-channel");
                w.unclaimed.push_back(sid);
                w.channels.insert(sid, ChannelWire {
                    initial_complete: has(frame, Frame::FLAG_COMPLETE),
                    ..Default::default()
                });
            }
            emit(json!({"event": "request_n", "interaction": "request-channel",
                        "n": request.get_initial_request_n(), "initial": true}));
        }
        Body::RequestN(request_n) => {
            emit(json!({"event": "request_n", "interaction": interaction_of(wire, sid),
                        "n": request_n.get_n(), "initial": false}));
        }
        Body::Payload(_) => {
            let mut w = wire.lock().unwrap();
            if !w.channels.contains_key(&sid) {
                return;
            }
            if has(frame, Frame::FLAG_FOLLOW) {
                *w.fragment_next.entry(sid).or_default() |= has(frame, Frame::FLAG_NEXT);
                return;
            }
            let next = has(frame, Frame::FLAG_NEXT) || w.fragment_next.remove(&sid).unwrap_or(false);
            let complete = has(frame, Frame::FLAG_COMPLETE);
            let channel = w.channels.get_mut(&sid).unwrap();
            if next {
                channel.nexts.push_back(complete);
            }
            if complete {
                channel.form = Some(if next { "flag" } else { "frame" });
            }
        }
        Body::Error(error) if sid == 0 => {
            emit(json!({"event": "error", "code": error.get_code(),
                        "message": error.get_data().map(|b| String::from_utf8_lossy(b).into_owned())
                            .unwrap_or_default()}));
        }
        _ => {}
    }
}

/// Emits `cancel` when a responder stream is dropped before it ended: the library drops it
/// when a CANCEL aborts the stream (`Abortable`).
struct CancelGuard {
    interaction: &'static str,
    sent: Option<Arc<Mutex<usize>>>,
    done: bool,
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut event = json!({"event": "cancel", "interaction": self.interaction});
        if let Some(sent) = &self.sent {
            event["sent"] = json!(*sent.lock().unwrap());
        }
        emit(event);
    }
}

/// The demo responder of one connection.
struct Demo {
    wire: Shared,
}

fn echo(payload: &Payload) -> Payload {
    Payload::new(payload.data().cloned(), payload.metadata().cloned())
}

fn data_of(payload: &Payload) -> Option<&[u8]> {
    payload.data().map(|b| b.as_ref())
}

fn metadata_of(payload: &Payload) -> Option<&[u8]> {
    payload.metadata().map(|b| b.as_ref())
}

#[async_trait]
impl RSocket for Demo {
    async fn metadata_push(&self, req: Payload) -> rsocket_rust::Result<()> {
        let described = describe(None, Some(metadata_of(&req).unwrap_or(&[])), Mode::Both);
        let mut event = json!({"event": "metadata_push"});
        for (k, v) in described {
            if k.starts_with("metadata") {
                event[k] = v;
            }
        }
        emit(event);
        Ok(())
    }

    async fn fire_and_forget(&self, req: Payload) -> rsocket_rust::Result<()> {
        emit(payload_event("fnf", data_of(&req), metadata_of(&req), json!({})));
        Ok(())
    }

    async fn request_response(&self, req: Payload) -> rsocket_rust::Result<Option<Payload>> {
        emit(payload_event("request", data_of(&req), metadata_of(&req),
                           json!({"interaction": "request-response"})));
        match error_requested(data_of(&req)) {
            // the library answers ERROR[APPLICATION_ERROR] with the error's text
            Some(message) => Err(anyhow::anyhow!("{}", message)),
            None => Ok(Some(echo(&req))),
        }
    }

    fn request_stream(&self, req: Payload) -> Flux<rsocket_rust::Result<Payload>> {
        emit(payload_event("request", data_of(&req), metadata_of(&req),
                           json!({"interaction": "request-stream"})));
        let outcome = match error_requested(data_of(&req)) {
            Some(message) => Err(message),
            None => stream_count(data_of(&req)),
        };
        Box::pin(stream! {
            let sent = Arc::new(Mutex::new(0usize));
            let mut guard = CancelGuard { interaction: "request-stream", sent: Some(sent.clone()),
                                          done: false };
            match outcome {
                Err(message) => {
                    guard.done = true;
                    yield Err(anyhow::anyhow!("{}", message));
                }
                Ok(count) => {
                    for i in 0..count {
                        *sent.lock().unwrap() += 1;
                        yield Ok(Payload::builder().set_data_utf8(&i.to_string()).build());
                    }
                    guard.done = true;
                }
            }
        })
    }

    fn request_channel(&self, reqs: Flux<rsocket_rust::Result<Payload>>) -> Flux<rsocket_rust::Result<Payload>> {
        let wire = self.wire.clone();
        Box::pin(stream! {
            let mut reqs = reqs;
            // the REQUEST_CHANNELs of a connection reach the responder in order
            let sid = wire.lock().unwrap().unclaimed.pop_front();
            let initial_complete = sid
                .and_then(|s| wire.lock().unwrap().channels.get(&s).map(|c| c.initial_complete))
                .unwrap_or(false);
            let mut guard = CancelGuard { interaction: "request-channel", sent: None, done: false };
            let mut first = true;
            while let Some(item) = reqs.next().await {
                match item {
                    Ok(payload) => {
                        if first {
                            first = false;
                            emit(payload_event("request", data_of(&payload), metadata_of(&payload),
                                               json!({"interaction": "request-channel",
                                                      "complete": initial_complete})));
                            if let Some(message) = error_requested(data_of(&payload)) {
                                guard.done = true;
                                yield Err(anyhow::anyhow!("{}", message));
                                return;
                            }
                        } else {
                            let complete = sid
                                .and_then(|s| wire.lock().unwrap().channels.get_mut(&s)
                                          .and_then(|c| c.nexts.pop_front()))
                                .unwrap_or(false);
                            emit(payload_event("channel_next", data_of(&payload), metadata_of(&payload),
                                               json!({"complete": complete})));
                        }
                        yield Ok(echo(&payload));
                    }
                    Err(error) => {
                        guard.done = true;
                        let (code, message) = error_info(&error)
                            .unwrap_or((0, error.to_string()));
                        emit(json!({"event": "channel_inbound_error", "code": code,
                                    "message": message}));
                        return;
                    }
                }
            }
            let form = sid
                .and_then(|s| wire.lock().unwrap().channels.get(&s).and_then(|c| c.form))
                .unwrap_or("frame");
            emit(json!({"event": "channel_inbound_complete", "form": form}));
            guard.done = true;
        })
    }
}

/// A `ServerTransport` handing the library exactly one accepted connection.
struct OneConnection<T> {
    connection: Option<T>,
}

#[async_trait]
impl<T: Transport + Send + Sync> ServerTransport for OneConnection<T> {
    type Item = T;

    async fn start(&mut self) -> rsocket_rust::Result<()> {
        Ok(())
    }

    async fn next(&mut self) -> Option<rsocket_rust::Result<T>> {
        self.connection.take().map(Ok)
    }
}

fn serve_connection<T>(inner: T, fragment: usize)
where
    T: Transport + Send + Sync + 'static,
    T::Conn: Send + Sync + 'static,
{
    let wire: Shared = Arc::new(Mutex::new(Wire::default()));
    let tap_wire = wire.clone();
    let tap = Tap { on_recv: Arc::new(move |frame| on_recv(&tap_wire, frame)), on_sent: Arc::new(|_| {}) };
    let transport = TappedTransport { inner, tap, closer: Closer::default() };
    let acceptor_wire = wire;
    let server = RSocketFactory::receive()
        .transport(OneConnection { connection: Some(transport) })
        .fragment(fragment)
        .acceptor(Box::new(move |setup: SetupPayload, _requester: Box<dyn RSocket>| {
            let data = setup.data().map(|b| b.as_ref()).unwrap_or(&[]);
            if let Some(rest) = data.strip_prefix(b"reject:".as_slice()) {
                let message = String::from_utf8_lossy(rest).into_owned();
                emit(json!({"event": "setup_rejected", "message": message}));
                // the library answers ERROR[REJECTED_SETUP] with the error's text
                return Err(anyhow::anyhow!("{}", message));
            }
            Ok(Box::new(Demo { wire: acceptor_wire.clone() }) as Box<dyn RSocket>)
        }));
    tokio::spawn(async move {
        if let Err(e) = server.serve().await {
            eprintln!("serve failed: {}", e);
        }
    });
}

async fn accept_loop(listener: TcpListener, websocket: bool, fragment: usize) {
    loop {
        let socket: TcpStream = match listener.accept().await {
            Ok((socket, _)) => socket,
            Err(e) => {
                eprintln!("accept failed: {}", e);
                continue;
            }
        };
        if websocket {
            serve_connection(WebsocketClientTransport::from(socket), fragment);
        } else {
            serve_connection(TcpClientTransport::from(socket), fragment);
        }
    }
}

async fn until_stopped(timeout: u64, watch_stdin: bool) -> &'static str {
    let stdin = async {
        if !watch_stdin {
            return futures::future::pending::<()>().await;
        }
        let mut stdin = tokio::io::stdin();
        let mut buffer = [0u8; 1024];
        loop {
            match stdin.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    };
    tokio::select! {
        _ = stdin => "stdin closed",
        _ = tokio::time::sleep(Duration::from_secs(timeout)) => "timeout",
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = Args::parse(
        &argv,
        &["host", "port", "fragment", "completion", "request-n", "timeout", "transport", "path"],
        &["watch-stdin"],
    );
    if let Some(p) = args.positional.first() {
        usage_error(&format!("unexpected argument {:?}", p));
    }
    let websocket = match args.get("transport").unwrap_or("tcp") {
        "tcp" => false,
        "ws" => true,
        other => usage_error(&format!("--transport must be tcp or ws, got {:?}", other)),
    };
    match args.get("completion") {
        None | Some("frame") => {}
        Some("flag") => unsupported(
            "rsocket-rust ends every stream and channel with a separate PAYLOAD[C] (the responder \
             loop sends PAYLOAD[C] after the application's stream ends): no C on the last PAYLOAD"),
        Some(other) => usage_error(&format!("--completion must be flag or frame, got {:?}", other)),
    }
    if let Some(n) = args.int("request-n") {
        if n != MAX_REQUEST_N {
            unsupported(
                "rsocket-rust's channel responder always grants REQUEST_N 2147483647 right after \
                 REQUEST_CHANNEL (\"TODO: support custom RequestN\"): no credit batch can be set");
        }
    }
    let fragment = match args.int("fragment") {
        None => 0,
        Some(n) if n >= MIN_FRAGMENT => n as usize,
        Some(_) => unsupported(
            "rsocket-rust cannot fragment below 64 bytes per frame (ServerBuilder::fragment panics: \
             the size counts the 6-byte header and the data and metadata, not the 3-byte metadata \
             length)"),
    };
    let host = args.get("host").unwrap_or(HOST).to_string();
    let port = args.int("port").unwrap_or(0);
    let timeout = args.int("timeout").unwrap_or(600).max(0) as u64;
    let listener = match TcpListener::bind((host.as_str(), port as u16)).await {
        Ok(listener) => listener,
        Err(e) => finish(EXIT_FAILURE, Some(json!({"failure": format!("cannot listen: {}", e)}))),
    };
    let bound = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    println!("LISTENING {}", bound);
    use std::io::Write;
    let _ = std::io::stdout().flush();
    tokio::spawn(accept_loop(listener, websocket, fragment));
    let reason = until_stopped(timeout, args.flag("watch-stdin")).await;
    emit(json!({"event": "stopping", "reason": reason}));
    finish(EXIT_OK, None::<Value>);
}
