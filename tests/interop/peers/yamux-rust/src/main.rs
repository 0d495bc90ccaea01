//! yamuxpeer: the Rust `yamux` crate's interop peer of rsocket_tx
//! (tests/interop/test_yamux_interop.py).
//!
//!     yamuxpeer server                    listen on 127.0.0.1:0, print "listening PORT"
//!     yamuxpeer client ADDR SCENARIO...   connect, run the scenarios, print "ok NAME" or
//!                                         "FAIL NAME: why" each, exit 1 on any failure
//!
//! The stream commands are those of ../yamux-go (its README): echo, source N, sink,
//! wait-reset, reset (this crate resets a stream dropped without close), open, goaway (this
//! crate's only Go Away is the one before it closes the connection).

use std::cell::RefCell;
use std::rc::Rc;
use std::task::Poll;

use futures::channel::{mpsc, oneshot};
use futures::future::poll_fn;
use futures::{AsyncReadExt, AsyncWriteExt, StreamExt};
use sha2::{Digest, Sha256};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::compat::TokioAsyncReadCompatExt;
use yamux::{Config, Connection, Mode, Stream};

enum Command {
    Open(oneshot::Sender<Result<Stream, String>>),
    Close,
}

#[derive(Clone)]
struct Session {
    commands: mpsc::UnboundedSender<Command>,
}

impl Session {
    async fn open(&self) -> Result<Stream, String> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .unbounded_send(Command::Open(tx))
            .map_err(|_| "the session is closed".to_string())?;
        rx.await.map_err(|_| "the session is closed".to_string())?
    }

    fn close(&self) {
        let _ = self.commands.unbounded_send(Command::Close);
    }
}

fn say(line: String) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Drive one connection: opens and closes on command, hands each inbound stream to `serve`.
fn start(socket: TcpStream, mode: Mode) -> (Session, tokio::task::JoinHandle<()>) {
    let (tx, mut rx) = mpsc::unbounded::<Command>();
    let session = Session { commands: tx };
    let me = session.clone();
    let handle = tokio::task::spawn_local(async move {
        let mut conn = Connection::new(socket.compat(), Config::default(), mode);
        let opening: Rc<RefCell<Vec<oneshot::Sender<Result<Stream, String>>>>> = Rc::default();
        let mut closing = false;
        let result = poll_fn(|cx| {
            while let Poll::Ready(command) = rx.poll_next_unpin(cx) {
                match command {
                    Some(Command::Open(reply)) => opening.borrow_mut().push(reply),
                    Some(Command::Close) | None => closing = true,
                }
                if closing {
                    break;
                }
            }
            if closing {
                return conn.poll_close(cx).map(|r| r.map_err(|e| e.to_string()));
            }
            while !opening.borrow().is_empty() {
                match conn.poll_new_outbound(cx) {
                    Poll::Ready(result) => {
                        let reply = opening.borrow_mut().remove(0);
                        let _ = reply.send(result.map_err(|e| e.to_string()));
                    }
                    Poll::Pending => break,
                }
            }
            loop {
                match conn.poll_next_inbound(cx) {
                    Poll::Ready(Some(Ok(stream))) => {
                        let session = me.clone();
                        tokio::task::spawn_local(serve(session, stream));
                    }
                    Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(e.to_string())),
                    Poll::Ready(None) => return Poll::Ready(Ok(())),
                    Poll::Pending => return Poll::Pending,
                }
            }
        })
        .await;
        match result {
            Ok(()) => say("session closed".into()),
            Err(e) => say(format!("session ended: {e}")),
        }
    });
    (session, handle)
}

async fn read_line(stream: &mut Stream) -> std::io::Result<String> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        if stream.read(&mut byte).await? == 0 || byte[0] == b'\n' {
            return Ok(String::from_utf8_lossy(&line).into_owned());
        }
        line.push(byte[0]);
    }
}

/// Answer one stream's command.
async fn serve(session: Session, mut stream: Stream) {
    let id = stream.id();
    let line = match read_line(&mut stream).await {
        Ok(line) => line,
        Err(e) => return say(format!("error {id} reading the command: {e}")),
    };
    let fields: Vec<&str> = line.split_whitespace().collect();
    let result: std::io::Result<()> = async {
        match fields.first().copied() {
            Some("echo") => {
                let mut buf = vec![0u8; 65536];
                loop {
                    let n = stream.read(&mut buf).await?;
                    if n == 0 {
                        break;
                    }
                    stream.write_all(&buf[..n]).await?;
                }
            }
            Some("source") => {
                let n: usize = fields.get(1).and_then(|n| n.parse().ok()).unwrap_or(0);
                stream.write_all(&pattern(n)).await?;
            }
            Some("sink") => {
                let mut data = Vec::new();
                stream.read_to_end(&mut data).await?;
                let answer = format!("got {} {}\n", data.len(), hex(&Sha256::digest(&data)));
                stream.write_all(answer.as_bytes()).await?;
            }
            Some("wait-reset") => {
                // this crate reads a reset stream to its end (Ok(0)), like a FIN; the reset
                // shows in the state: closed both ways although we never closed our half
                say(format!("waiting {id}"));
                let mut data = Vec::new();
                let read = stream.read_to_end(&mut data).await;
                if read.is_ok() && stream.is_closed() {
                    say(format!("reset {id}"));
                } else {
                    say(format!("not reset {id}: {read:?}"));
                }
                return Ok(());
            }
            Some("reset") => {
                drop(stream); // dropped without close: this crate sends RST
                return Ok(());
            }
            Some("goaway") => {
                stream.write_all(b"ok\n").await?;
                stream.close().await?;
                session.close(); // Go Away (normal), then the connection closes
                return Ok(());
            }
            Some("open") => {
                let answer = match open_and_check(&session).await {
                    Ok(()) => "opened ok\n".to_string(),
                    Err(e) => format!("opened FAIL {e}\n"),
                };
                stream.write_all(answer.as_bytes()).await?;
            }
            other => {
                stream.write_all(format!("unknown command {other:?}\n").as_bytes()).await?;
            }
        }
        stream.close().await
    }
    .await;
    if let Err(e) = result {
        say(format!("error {id} {line}: {e}"));
    }
}

async fn open_and_check(session: &Session) -> Result<(), String> {
    let data = pattern(100_000);
    let got = command(session, "echo", &data).await?;
    if got != data {
        return Err(format!("echo of {} bytes differs", got.len()));
    }
    Ok(())
}

/// Open a stream, send the line and body, close our half, read to the end.
async fn command(session: &Session, line: &str, body: &[u8]) -> Result<Vec<u8>, String> {
    let stream = session.open().await?;
    let (mut reader, mut writer) = AsyncReadExt::split(stream);
    let mut message = format!("{line}\n").into_bytes();
    message.extend_from_slice(body);
    let write = async {
        writer.write_all(&message).await?;
        writer.close().await
    };
    let mut got = Vec::new();
    let read = reader.read_to_end(&mut got);
    let (w, r) = futures::join!(write, read);
    w.map_err(|e| format!("write: {e}"))?;
    r.map_err(|e| format!("read: {e}"))?;
    Ok(got)
}

async fn scenario(session: &Session, name: &str) -> Result<(), String> {
    match name {
        "streams" => {
            let runs = (0..200usize).map(|i| {
                let session = session.clone();
                async move {
                    let data = vec![(i % 256) as u8; 1000 + i * 37];
                    let got = command(&session, "echo", &data).await?;
                    if got != data {
                        return Err(format!("stream {i}: echo of {} bytes differs", got.len()));
                    }
                    Ok(())
                }
            });
            for result in futures::future::join_all(runs).await {
                result?;
            }
            Ok(())
        }
        "sink" => {
            let data = pattern(10 << 20);
            let got = command(session, "sink", &data).await?;
            let want = format!("got {} {}\n", data.len(), hex(&Sha256::digest(&data)));
            if got != want.as_bytes() {
                return Err(format!("answer {:?}", String::from_utf8_lossy(&got)));
            }
            Ok(())
        }
        "source" => {
            let got = command(session, &format!("source {}", 10 << 20), &[]).await?;
            if got != pattern(10 << 20) {
                return Err(format!("{} bytes received, not the pattern", got.len()));
            }
            Ok(())
        }
        "echo-big" => {
            let data = pattern(10 << 20);
            let got = command(session, "echo", &data).await?;
            if got != data {
                return Err(format!("echo of {} bytes differs", got.len()));
            }
            Ok(())
        }
        "serverping" | "open" => {
            let (line, want) = if name == "open" {
                ("open", "opened ok\n")
            } else {
                ("ping", "pong\n")
            };
            let got = command(session, line, &[]).await?;
            if got != want.as_bytes() {
                return Err(format!("answer {:?}", String::from_utf8_lossy(&got)));
            }
            Ok(())
        }
        "reset" => {
            let mut stream = session.open().await?;
            stream.write_all(b"reset\n").await.map_err(|e| e.to_string())?;
            let mut got = Vec::new();
            let read = stream.read_to_end(&mut got).await;
            if read.is_ok() && stream.is_closed() {
                Ok(())
            } else {
                Err(format!("read ended with {read:?}, not a reset"))
            }
        }
        "goaway" => {
            // this crate ends its connection on any Go Away, even before it reads the answer
            // that follows it: what counts is that no stream opens any more
            let _ = command(session, "goaway", &[]).await;
            match session.open().await {
                Err(_) => Ok(()),
                Ok(_) => Err("a stream opened after Go Away".into()),
            }
        }
        other => Err(format!("unknown scenario {other:?}")),
    }
}

async fn run(args: Vec<String>) -> i32 {
    match args.get(1).map(String::as_str) {
        Some("server") => {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("listen");
            say(format!("listening {}", listener.local_addr().expect("address").port()));
            loop {
                let (socket, _) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(_) => return 2,
                };
                say("session".into());
                start(socket, Mode::Server);
            }
        }
        Some("client") if args.len() > 2 => {
            let socket = match TcpStream::connect(&args[2]).await {
                Ok(socket) => socket,
                Err(e) => {
                    eprintln!("{e}");
                    return 2;
                }
            };
            let (session, handle) = start(socket, Mode::Client);
            let mut failed = false;
            for name in &args[3..] {
                match scenario(&session, name).await {
                    Ok(()) => say(format!("ok {name}")),
                    Err(e) => {
                        failed = true;
                        say(format!("FAIL {name}: {e}"));
                    }
                }
            }
            session.close();
            let _ = handle.await;
            i32::from(failed)
        }
        _ => {
            eprintln!("usage: yamuxpeer server | client ADDR SCENARIO...");
            2
        }
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("runtime");
    let local = tokio::task::LocalSet::new();
    let code = local.block_on(&runtime, run(std::env::args().collect()));
    std::process::exit(code);
}
