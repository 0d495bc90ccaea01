//! Shared pieces of the rsocket-rust 0.7.5 interop peer (`server` and `client` binaries).
//!
//! The command lines, the JSON formats and the demo responder rules are the ones of the other
//! peers (`../README.md`, "Command lines", "Server events", "The demo responders"); this file
//! holds the parts both programs need:
//!
//! * option parsing ([`Args`]) and the JSON output ([`emit`], [`finish`], [`describe`]);
//! * the demo rules ([`error_requested`], [`stream_count`], [`pattern`]);
//! * [`error_info`]: the `{code, message}` of an ERROR as rsocket-rust reports it;
//! * the *wire tap* ([`TappedTransport`]): a `Transport` wrapping rsocket-rust's own TCP or
//!   WebSocket connection.  Every frame the library reads is shown to an observer before the
//!   library dispatches it, and every frame it writes is handed, in order, to a writer task
//!   that writes it with the library's own sink and then shows it to the observer.  The tap
//!   only observes (it never adds, drops or changes a frame); it exists because the library's
//!   API does not say what the demo events need (the SETUP's version and flags, request-n, C on
//!   REQUEST_CHANNEL, how a channel's inbound side completed, an ERROR on stream 0), has no
//!   way to learn that a frame it queued has been written, and has no `close()`: the tap's
//!   [`Closer`] closes the library's sink (TCP FIN, WebSocket Close) at the end of a client run.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::sync::Arc;

use base64::Engine;
use futures::channel::mpsc as fmpsc;
use futures::{SinkExt, StreamExt};
use rsocket_rust::async_trait;
use rsocket_rust::error::RSocketError;
use rsocket_rust::frame::{Body, Frame};
use rsocket_rust::transport::{Connection, FrameSink, FrameStream, Transport};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use tokio::sync::Notify;

/// Name of this peer in results (`peers.PEERS` key).
pub const PEER: &str = "rsocket-rust-0.7.5";
pub const HOST: &str = "127.0.0.1";
/// 2^31 - 1: the only request n rsocket-rust ever sends (REQUEST_STREAM, REQUEST_CHANNEL and
/// the channel responder's REQUEST_N).
pub const MAX_REQUEST_N: i64 = 2_147_483_647;
/// rsocket-rust's smallest fragment size (`transport::MIN_MTU`).
pub const MIN_FRAGMENT: i64 = 64;

pub const EXIT_OK: i32 = 0;
pub const EXIT_RSOCKET_ERROR: i32 = 1;
pub const EXIT_FAILURE: i32 = 2;
pub const EXIT_UNSUPPORTED: i32 = 3;

/// Write one JSON object as a line on stdout and flush it.
pub fn emit(value: Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", value);
    let _ = out.flush();
}

/// Print `value` (if any) and end the process with `code`.
pub fn finish(code: i32, value: Option<Value>) -> ! {
    if let Some(v) = value {
        emit(v);
    }
    std::process::exit(code)
}

pub fn usage_error(message: &str) -> ! {
    finish(EXIT_FAILURE, Some(json!({"failure": format!("usage: {}", message)})))
}

pub fn unsupported(reason: &str) -> ! {
    finish(EXIT_UNSUPPORTED, Some(json!({"unsupported": reason})))
}

/// Parsed command line: positional arguments, `--name value` options, `--flag` switches
/// (also `--name=value`).
pub struct Args {
    pub positional: Vec<String>,
    values: HashMap<String, String>,
    flags: HashSet<String>,
}

impl Args {
    /// Parse `argv` (without the program name).  `valued`: options taking a value; `switches`:
    /// options without one.  Anything else is a usage error (exit 2).
    pub fn parse(argv: &[String], valued: &[&str], switches: &[&str]) -> Args {
        let mut args = Args { positional: vec![], values: HashMap::new(), flags: HashSet::new() };
        let mut i = 0;
        while i < argv.len() {
            let arg = &argv[i];
            i += 1;
            let Some(name) = arg.strip_prefix("--") else {
                args.positional.push(arg.clone());
                continue;
            };
            let (name, inline) = match name.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (name.to_string(), None),
            };
            if switches.contains(&name.as_str()) {
                args.flags.insert(name);
            } else if valued.contains(&name.as_str()) {
                let value = match inline {
                    Some(v) => v,
                    None => {
                        if i >= argv.len() {
                            usage_error(&format!("option --{} needs a value", name));
                        }
                        i += 1;
                        argv[i - 1].clone()
                    }
                };
                args.values.insert(name, value);
            } else {
                usage_error(&format!("unknown option --{}", name));
            }
        }
        args
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(|s| s.as_str())
    }

    pub fn flag(&self, name: &str) -> bool {
        self.flags.contains(name)
    }

    /// An integer option (`None` when absent; a usage error when not an integer).
    pub fn int(&self, name: &str) -> Option<i64> {
        self.get(name).map(|v| {
            v.parse::<i64>()
                .unwrap_or_else(|_| usage_error(&format!("option --{} needs an integer, got {:?}", name, v)))
        })
    }
}

/// The bytes of `--data-size N`/`--metadata-size N`: byte i is `i % 256`.
pub fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 256) as u8).collect()
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{:02x}", b)).collect()
}

pub fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

pub fn unb64(text: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap_or_else(|_| usage_error(&format!("invalid base64 {:?}", text)))
}

/// How a payload is reported: `Full` `{data, metadata}` (base64), `Digest` `{data_len,
/// data_sha256, metadata_len, metadata_sha256}`, `Both` (server events) all six keys.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Full,
    Digest,
    Both,
}

/// The JSON fields of a payload.  Absent data is reported as empty (rsocket-rust decodes
/// empty data as `None`); absent metadata (no M flag) as null.
pub fn describe(data: Option<&[u8]>, metadata: Option<&[u8]>, mode: Mode) -> Map<String, Value> {
    let data = data.unwrap_or(&[]);
    let mut out = Map::new();
    if mode != Mode::Digest {
        out.insert("data".into(), json!(b64(data)));
        out.insert("metadata".into(), metadata.map(b64).map_or(Value::Null, Value::from));
    }
    if mode != Mode::Full {
        out.insert("data_len".into(), json!(data.len()));
        out.insert("data_sha256".into(), json!(sha256_hex(data)));
        out.insert("metadata_len".into(), metadata.map_or(Value::Null, |m| json!(m.len())));
        out.insert("metadata_sha256".into(), metadata.map_or(Value::Null, |m| json!(sha256_hex(m))));
    }
    out
}

/// [`describe`] of an rsocket-rust payload.
pub fn describe_payload(payload: &rsocket_rust::prelude::Payload, mode: Mode) -> Map<String, Value> {
    describe(payload.data().map(|b| b.as_ref()), payload.metadata().map(|b| b.as_ref()), mode)
}

/// `{"event": name, ...extra, ...payload (Both)}`.
pub fn payload_event(name: &str, data: Option<&[u8]>, metadata: Option<&[u8]>, extra: Value) -> Value {
    let mut out = Map::new();
    out.insert("event".into(), json!(name));
    if let Value::Object(fields) = extra {
        out.extend(fields);
    }
    out.extend(describe(data, metadata, Mode::Both));
    Value::Object(out)
}

/// The application error message when data starts with `error:`.
pub fn error_requested(data: Option<&[u8]>) -> Option<String> {
    data.unwrap_or(&[])
        .strip_prefix(b"error:".as_slice())
        .map(|rest| String::from_utf8_lossy(rest).into_owned())
}

/// Request-stream count: decimal data, 10 when empty; the demo's error text otherwise.
pub fn stream_count(data: Option<&[u8]>) -> Result<usize, String> {
    let bytes = data.unwrap_or(&[]);
    let text: String = bytes.iter().map(|&b| b as char).collect(); // latin-1, as the others
    if text.is_empty() {
        return Ok(10);
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("request-stream data must be a decimal count, got {}", py_repr(&text)));
    }
    text.parse::<usize>().map_err(|e| e.to_string())
}

/// Python's `repr` of a str (quotes as the py and js peers print them).
fn py_repr(text: &str) -> String {
    if text.contains('\'') && !text.contains('"') {
        format!("\"{}\"", text)
    } else {
        format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
    }
}

/// `(code, message)` of an RSocket ERROR the library reported as `error`, or None when the
/// error is not an ERROR frame from the peer.  rsocket-rust turns ERROR[code] into an
/// `RSocketError` variant per code (`RSocketError::must_new_from_code`); the message is the
/// ERROR data as UTF-8 (empty when it is not valid UTF-8: `get_data_utf8`).
pub fn error_info(error: &anyhow::Error) -> Option<(u32, String)> {
    use rsocket_rust::error as e;
    let found = error.downcast_ref::<RSocketError>()?;
    let (code, message) = match found {
        RSocketError::InvalidSetup(m) => (e::ERR_INVALID_SETUP, m),
        RSocketError::UnsupportedSetup(m) => (e::ERR_UNSUPPORTED_SETUP, m),
        RSocketError::RejectedSetup(m) => (e::ERR_REJECT_SETUP, m),
        RSocketError::RejectedResume(m) => (e::ERR_REJECT_RESUME, m),
        RSocketError::ConnectionException(m) => (e::ERR_CONN_FAILED, m),
        RSocketError::ConnectionClosed(m) => (e::ERR_CONN_CLOSED, m),
        RSocketError::ApplicationException(m) => (e::ERR_APPLICATION, m),
        RSocketError::RequestRejected(m) => (e::ERR_REJECTED, m),
        RSocketError::RequestCancelled(m) => (e::ERR_CANCELED, m),
        RSocketError::RequestInvalid(m) => (e::ERR_INVALID, m),
        RSocketError::Reserved(code, m) => (*code, m),
        _ => return None,
    };
    Some((code, message.clone()))
}

pub fn error_json(code: u32, message: &str) -> Value {
    json!({"code": code, "message": message})
}

// ---------------------------------------------------------------------------------------------
// The wire tap
// ---------------------------------------------------------------------------------------------

/// Type, stream id and flags of a frame the library wrote (the frame itself is moved into
/// the library's sink).
#[derive(Clone, Copy, Debug)]
pub struct Sent {
    pub kind: &'static str,
    pub stream_id: u32,
    pub flags: u16,
}

impl Sent {
    pub fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }
}

/// What the tap shows the frames to: `on_recv` sees each frame read, before the library
/// dispatches it; `on_sent` each frame the library wrote, after the write (and flush).
#[derive(Clone)]
pub struct Tap {
    pub on_recv: Arc<dyn Fn(&Frame) + Send + Sync>,
    pub on_sent: Arc<dyn Fn(Sent) + Send + Sync>,
}

/// Closes the library's sink of a [`TappedTransport`] connection once everything queued
/// before [`Closer::close`] has been written: TCP shutdown (FIN) or a WebSocket Close.
#[derive(Clone, Default)]
pub struct Closer {
    notify: Arc<Notify>,
}

impl Closer {
    pub fn close(&self) {
        self.notify.notify_one();
    }
}

/// A library `Transport` (`TcpClientTransport`, `WebsocketClientTransport`) whose connection
/// goes through the tap.
pub struct TappedTransport<T> {
    pub inner: T,
    pub tap: Tap,
    pub closer: Closer,
}

pub struct TappedConnection<C> {
    inner: C,
    tap: Tap,
    closer: Closer,
}

#[async_trait]
impl<T> Transport for TappedTransport<T>
where
    T: Transport + Send + Sync + 'static,
    T::Conn: Send + Sync + 'static,
{
    type Conn = TappedConnection<T::Conn>;

    async fn connect(self) -> rsocket_rust::Result<Self::Conn> {
        let inner = self.inner.connect().await?;
        Ok(TappedConnection { inner, tap: self.tap, closer: self.closer })
    }
}

impl<C: Connection> Connection for TappedConnection<C> {
    fn split(self) -> (Box<FrameSink>, Box<FrameStream>) {
        let (mut sink, stream) = self.inner.split();
        let (tx, mut rx) = fmpsc::unbounded::<Frame>();
        let on_sent = self.tap.on_sent.clone();
        let closer = self.closer.notify.clone();
        // The writer: the library's frames, in order, one `send` (write + flush) each, as the
        // library's own write loop does.
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    biased;
                    next = rx.next() => match next {
                        Some(frame) => {
                            if !write_and_show(&mut sink, frame, &on_sent).await {
                                break;
                            }
                        }
                        None => {
                            let _ = sink.close().await;
                            break;
                        }
                    },
                    _ = closer.notified() => {
                        // write what is already queued, then close
                        while let Ok(frame) = rx.try_recv() {
                            if !write_and_show(&mut sink, frame, &on_sent).await {
                                break;
                            }
                        }
                        let _ = sink.close().await;
                        break;
                    }
                }
            }
        });
        let on_recv = self.tap.on_recv;
        let stream = stream.inspect(move |item| {
            if let Ok(frame) = item {
                on_recv(frame);
            }
        });
        let sink = tx.sink_map_err(|e| RSocketError::WithDescription(format!("tap writer: {}", e)));
        (Box::new(sink), Box::new(stream))
    }
}

async fn write_and_show(
    sink: &mut Box<FrameSink>,
    frame: Frame,
    on_sent: &Arc<dyn Fn(Sent) + Send + Sync>,
) -> bool {
    let sent = Sent { kind: frame_type(&frame), stream_id: frame.get_stream_id(), flags: frame.get_flag() };
    if sink.send(frame).await.is_err() {
        return false;
    }
    on_sent(sent);
    true
}

/// The frame type's name (RSocket spec names).
pub fn frame_type(frame: &Frame) -> &'static str {
    match frame.get_body_ref() {
        Body::Setup(_) => "SETUP",
        Body::Lease(_) => "LEASE",
        Body::Keepalive(_) => "KEEPALIVE",
        Body::RequestFNF(_) => "REQUEST_FNF",
        Body::RequestResponse(_) => "REQUEST_RESPONSE",
        Body::RequestStream(_) => "REQUEST_STREAM",
        Body::RequestChannel(_) => "REQUEST_CHANNEL",
        Body::RequestN(_) => "REQUEST_N",
        Body::Cancel() => "CANCEL",
        Body::Payload(_) => "PAYLOAD",
        Body::Error(_) => "ERROR",
        Body::MetadataPush(_) => "METADATA_PUSH",
        Body::Resume(_) => "RESUME",
        Body::ResumeOK(_) => "RESUME_OK",
    }
}

pub fn has(frame: &Frame, flag: u16) -> bool {
    frame.get_flag() & flag != 0
}
