//! rsocket-rust 0.7.5 interop client: runs ONE interaction and prints the result as JSON.
//!
//! ```text
//! client INTERACTION --port P [--host 127.0.0.1]
//!        [--data S | --data-b64 B | --data-size N] [--metadata S | --metadata-b64 B |
//!        --metadata-size N] [--take M] [--count N] [--fragment N] [--completion frame]
//!        [--digest] [--timeout S] [--keepalive MS] [--lifetime MS] [--setup-data S]
//!        [--setup-metadata S] [--transport tcp|ws] [--path /P]
//! ```
//!
//! Exit codes and output: `../README.md` ("Command lines", "Result JSON").  Exit 3 for what
//! the library cannot do: `--request-n K` on a stream or channel (it always requests
//! 2^31-1 and never sends REQUEST_N), `--completion flag` (it always ends its channel side with
//! a separate PAYLOAD[C]), `--fragment` below 64.  `--take M` drops the response stream after
//! M payloads; the library sends CANCEL only when the next PAYLOAD of that stream arrives, so
//! the client waits (bounded) until that CANCEL has been written or the stream completed.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use rsocket_rust::frame::{Body, Frame};
use rsocket_rust::prelude::*;
use rsocket_rust::Client;
use rsocket_rust_transport_tcp::TcpClientTransport;
use rsocket_rust_transport_websocket::WebsocketClientTransport;
use rsocket_tx_interop_rust_peer::*;
use serde_json::{json, Map, Value};
use tokio::sync::watch;

/// What the tap saw on the client's connection.
#[derive(Default)]
struct Wire {
    /// frames the library wrote
    sent: Vec<Sent>,
    /// stream ids on which a PAYLOAD with C or an ERROR arrived
    ended: Vec<u32>,
    /// ERROR on stream 0 (the library ignores it)
    connection_error: Option<(u32, String)>,
    /// the library's read loop ended (the connection is closed)
    closed: bool,
}

struct Watched {
    wire: Mutex<Wire>,
    changed: watch::Sender<u64>,
}

impl Watched {
    fn update(&self, f: impl FnOnce(&mut Wire)) {
        f(&mut self.wire.lock().unwrap());
        self.changed.send_modify(|n| *n += 1);
    }

    /// Wait until `predicate(wire)` holds; false after `deadline`.
    async fn wait_for(&self, deadline: Duration, predicate: impl Fn(&Wire) -> bool) -> bool {
        let mut rx = self.changed.subscribe();
        let check = async {
            loop {
                rx.borrow_and_update();
                if predicate(&self.wire.lock().unwrap()) {
                    return;
                }
                if rx.changed().await.is_err() {
                    return futures::future::pending::<()>().await;
                }
            }
        };
        tokio::time::timeout(deadline, check).await.is_ok()
    }
}

struct Options {
    interaction: String,
    data: Vec<u8>,
    metadata: Option<Vec<u8>>,
    take: Option<usize>,
    count: usize,
    fragment: usize,
    mode: Mode,
    timeout: u64,
    keepalive: u64,
    lifetime: u64,
    setup: Option<(Vec<u8>, Option<Vec<u8>>)>,
    url: Option<String>,
    address: String,
}

const INTERACTIONS: [&str; 5] =
    ["request-response", "fire-and-forget", "metadata-push", "request-stream", "request-channel"];

fn parse(argv: &[String]) -> Options {
    let args = Args::parse(
        argv,
        &["host", "port", "data", "data-b64", "data-size", "metadata", "metadata-b64",
          "metadata-size", "request-n", "take", "count", "fragment", "completion", "timeout",
          "keepalive", "lifetime", "setup-data", "setup-metadata", "transport", "path"],
        &["digest"],
    );
    let interaction = match args.positional.as_slice() {
        [one] if INTERACTIONS.contains(&one.as_str()) => one.clone(),
        _ => usage_error(&format!("one INTERACTION of {:?} expected", INTERACTIONS)),
    };
    let Some(port) = args.int("port") else { usage_error("--port is required") };
    let data = if let Some(n) = args.int("data-size") {
        pattern(n as usize)
    } else if let Some(b) = args.get("data-b64") {
        unb64(b)
    } else {
        args.get("data").unwrap_or("").as_bytes().to_vec()
    };
    let metadata = if let Some(n) = args.int("metadata-size") {
        Some(pattern(n as usize))
    } else if let Some(b) = args.get("metadata-b64") {
        Some(unb64(b))
    } else {
        args.get("metadata").map(|m| m.as_bytes().to_vec())
    };
    let streaming = interaction == "request-stream" || interaction == "request-channel";
    if let Some(n) = args.int("request-n") {
        if streaming && n != MAX_REQUEST_N {
            unsupported(
                "rsocket-rust has no request-n API: REQUEST_STREAM and REQUEST_CHANNEL always carry \
                 initial request n 2147483647 and the requester never sends REQUEST_N");
        }
    }
    match args.get("completion") {
        None | Some("frame") => {}
        Some("flag") => unsupported(
            "rsocket-rust's channel requester always ends its side with a separate PAYLOAD[C] \
             after the last payload (never C on REQUEST_CHANNEL or on the last PAYLOAD)"),
        Some(other) => usage_error(&format!("--completion must be flag or frame, got {:?}", other)),
    }
    let fragment = match args.int("fragment") {
        None => 0,
        Some(n) if n >= MIN_FRAGMENT => n as usize,
        Some(_) => unsupported(
            "rsocket-rust ignores a fragment size below 64 (ClientBuilder::fragment warns and keeps \
             fragmentation off)"),
    };
    let count = args.int("count").unwrap_or(3);
    if count < 1 {
        usage_error("--count must be >= 1 (the first payload travels in REQUEST_CHANNEL)");
    }
    let host = args.get("host").unwrap_or(HOST).to_string();
    let url = match args.get("transport").unwrap_or("tcp") {
        "tcp" => None,
        "ws" => {
            let path = args.get("path").unwrap_or("/");
            let path = if path.starts_with('/') { path.to_string() } else { format!("/{}", path) };
            Some(format!("ws://{}:{}{}", host, port, path))
        }
        other => usage_error(&format!("--transport must be tcp or ws, got {:?}", other)),
    };
    let setup = if args.get("setup-data").is_some() || args.get("setup-metadata").is_some() {
        Some((args.get("setup-data").unwrap_or("").as_bytes().to_vec(),
              args.get("setup-metadata").map(|m| m.as_bytes().to_vec())))
    } else {
        None
    };
    let digest = args.flag("digest") || args.get("data-size").is_some()
        || args.get("metadata-size").is_some();
    Options {
        interaction,
        data,
        metadata,
        take: args.int("take").map(|n| n.max(0) as usize),
        count: count as usize,
        fragment,
        mode: if digest { Mode::Digest } else { Mode::Full },
        timeout: args.int("timeout").unwrap_or(30).max(0) as u64,
        keepalive: args.int("keepalive").unwrap_or(20_000).max(0) as u64,
        lifetime: args.int("lifetime").unwrap_or(90_000).max(0) as u64,
        setup,
        url,
        address: format!("{}:{}", host, port),
    }
}

fn payload(data: &[u8], metadata: &Option<Vec<u8>>) -> Payload {
    Payload::new(Some(Bytes::from(data.to_vec())), metadata.as_ref().map(|m| Bytes::from(m.clone())))
}

/// The tap of the client's connection: records what [`Wire`] holds.
fn tap_for(watched: &Arc<Watched>) -> Tap {
    let recv = watched.clone();
    let sent = watched.clone();
    Tap {
        on_recv: Arc::new(move |frame: &Frame| {
            let sid = frame.get_stream_id();
            match frame.get_body_ref() {
                Body::Error(error) if sid == 0 => {
                    let message = error.get_data()
                        .map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default();
                    recv.update(|w| w.connection_error = Some((error.get_code(), message)));
                }
                Body::Error(_) => recv.update(|w| w.ended.push(sid)),
                Body::Payload(_) if has(frame, Frame::FLAG_COMPLETE) => {
                    recv.update(|w| w.ended.push(sid))
                }
                _ => {}
            }
        }),
        on_sent: Arc::new(move |frame: Sent| sent.update(|w| w.sent.push(frame))),
    }
}

/// Outcome of the interaction: (exit code, result fields).
type Outcome = (i32, Map<String, Value>);

fn error_outcome(error: &anyhow::Error, payloads: Option<Vec<Value>>) -> Outcome {
    let mut result = Map::new();
    match error_info(error) {
        Some((code, message)) => {
            result.insert("error".into(), error_json(code, &message));
            if let Some(p) = payloads {
                result.insert("payloads".into(), Value::Array(p));
            }
            (EXIT_RSOCKET_ERROR, result)
        }
        None => {
            result.insert("failure".into(), json!(format!("{}", error)));
            (EXIT_FAILURE, result)
        }
    }
}

/// Collect a response stream: every payload, the completion, cancel after `take`.
async fn collect(mut flux: Flux<rsocket_rust::Result<Payload>>, options: &Options) -> (Outcome, bool) {
    let mut payloads = vec![];
    loop {
        match flux.next().await {
            Some(Ok(p)) => {
                payloads.push(Value::Object(describe_payload(&p, options.mode)));
                if options.take == Some(payloads.len()) {
                    drop(flux); // the library sends CANCEL when the next PAYLOAD arrives
                    let mut result = Map::new();
                    result.insert("payloads".into(), Value::Array(payloads));
                    result.insert("completed".into(), json!(false));
                    result.insert("cancelled".into(), json!(true));
                    return ((EXIT_OK, result), true);
                }
            }
            Some(Err(e)) => return (error_outcome(&e, Some(payloads)), false),
            None => {
                let mut result = Map::new();
                result.insert("payloads".into(), Value::Array(payloads));
                result.insert("completed".into(), json!(true));
                result.insert("cancelled".into(), json!(false));
                return ((EXIT_OK, result), false);
            }
        }
    }
}

/// Stream id of the one request (the library numbers the client's requests 1, 3, ...; a
/// METADATA_PUSH takes one too).
const STREAM: u32 = 1;

async fn interact(client: &Client, options: &Options, watched: &Arc<Watched>) -> Outcome {
    let request = payload(&options.data, &options.metadata);
    let mut result = Map::new();
    match options.interaction.as_str() {
        "request-response" => match client.request_response(request).await {
            Ok(response) => {
                let described = response.map(|p| Value::Object(describe_payload(&p, options.mode)));
                result.insert("payload".into(), described.unwrap_or(Value::Null));
                (EXIT_OK, result)
            }
            Err(e) => error_outcome(&e, None),
        },
        "fire-and-forget" | "metadata-push" => {
            let push = options.interaction == "metadata-push";
            let sent = if push {
                let metadata = Bytes::from(options.metadata.clone().unwrap_or_default());
                client.metadata_push(Payload::new(None, Some(metadata))).await
            } else {
                client.fire_and_forget(request).await
            };
            if let Err(e) = sent {
                return error_outcome(&e, None);
            }
            // the call returns once the frame is queued: wait until its last frame is written
            let written = watched
                .wait_for(Duration::from_secs(options.timeout), |w| {
                    w.sent.iter().any(|f| {
                        f.stream_id == STREAM
                            && !f.has(Frame::FLAG_FOLLOW)
                            && if push { f.kind == "METADATA_PUSH" } else { f.kind != "SETUP" }
                    })
                })
                .await;
            if !written {
                result.insert("failure".into(), json!("the frame was not written in time"));
                return (EXIT_FAILURE, result);
            }
            result.insert("sent".into(), json!(true));
            (EXIT_OK, result)
        }
        "request-stream" => {
            let (outcome, cancelled) = collect(client.request_stream(request), options).await;
            if cancelled {
                wait_cancel(watched).await;
            }
            outcome
        }
        _ => {
            let outbound: Vec<rsocket_rust::Result<Payload>> = (0..options.count)
                .map(|i| Ok(payload(i.to_string().as_bytes(), &options.metadata)))
                .collect();
            let flux = client.request_channel(Box::pin(futures::stream::iter(outbound)));
            let (outcome, cancelled) = collect(flux, options).await;
            if cancelled {
                wait_cancel(watched).await;
            }
            outcome
        }
    }
}

/// After a take: the library writes CANCEL when the next PAYLOAD of the stream arrives (and
/// again for each later one); none comes if the stream ends first.  Waits up to 5 s for either.
async fn wait_cancel(watched: &Arc<Watched>) {
    watched
        .wait_for(Duration::from_secs(5), |w| {
            w.ended.contains(&STREAM)
                || w.sent.iter().any(|f| f.kind == "CANCEL" && f.stream_id == STREAM)
        })
        .await;
}

async fn run<T>(inner: T, options: &Options) -> Outcome
where
    T: Transport + Send + Sync + 'static,
    T::Conn: Send + Sync + 'static,
{
    let (changed, _) = watch::channel(0u64);
    let watched = Arc::new(Watched { wire: Mutex::new(Wire::default()), changed });
    let closer = Closer::default();
    let transport = TappedTransport { inner, tap: tap_for(&watched), closer: closer.clone() };
    let on_close = watched.clone();
    let mut builder = RSocketFactory::connect()
        .transport(transport)
        .mime_type("application/octet-stream", "application/octet-stream")
        .keepalive(Duration::from_millis(options.keepalive), Duration::from_millis(options.lifetime), 1)
        .fragment(options.fragment)
        .on_close(Box::new(move || on_close.update(|w| w.closed = true)));
    if let Some((data, metadata)) = &options.setup {
        builder = builder.setup(payload(data, metadata));
    }
    let client = match builder.start().await {
        Ok(client) => client,
        Err(e) => {
            let mut result = Map::new();
            result.insert("failure".into(), json!(format!("connection failed: {}", e)));
            return (EXIT_FAILURE, result);
        }
    };
    let interaction = interact(&client, options, &watched);
    let connection_error = watched.wait_for(Duration::MAX, |w| w.connection_error.is_some() || w.closed);
    let outcome = tokio::select! {
        biased;
        outcome = interaction => outcome,
        _ = connection_error => {
            let mut result = Map::new();
            let error = watched.wire.lock().unwrap().connection_error.clone();
            match error {
                Some((code, message)) => {
                    result.insert("error".into(), error_json(code, &message));
                    result.insert("connection_error".into(), error_json(code, &message));
                    (EXIT_RSOCKET_ERROR, result)
                }
                None => {
                    result.insert("failure".into(), json!("connection closed by the peer"));
                    (EXIT_FAILURE, result)
                }
            }
        }
    };
    // no close() in rsocket-rust: close its sink (TCP FIN / WebSocket Close) and give the peer
    // a moment to close its side
    closer.close();
    watched.wait_for(Duration::from_secs(2), |w| w.closed).await;
    outcome
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let options = parse(&argv);
    let work = async {
        match &options.url {
            Some(url) => run(WebsocketClientTransport::from(url.as_str()), &options).await,
            None => run(TcpClientTransport::from(options.address.as_str()), &options).await,
        }
    };
    let (code, fields) = match tokio::time::timeout(Duration::from_secs(options.timeout), work).await {
        Ok(outcome) => outcome,
        Err(_) => {
            let mut result = Map::new();
            result.insert("failure".into(), json!(format!("timeout after {}s", options.timeout)));
            (EXIT_FAILURE, result)
        }
    };
    let mut out = Map::new();
    if code != EXIT_FAILURE {
        out.insert("peer".into(), json!(PEER));
        out.insert("interaction".into(), json!(options.interaction));
    }
    out.extend(fields);
    finish(code, Some(Value::Object(out)));
}
