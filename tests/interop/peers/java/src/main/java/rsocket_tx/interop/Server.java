package rsocket_tx.interop;

import static rsocket_tx.interop.Common.describe;
import static rsocket_tx.interop.Common.emit;
import static rsocket_tx.interop.Common.object;

import io.netty.buffer.ByteBuf;
import io.rsocket.Closeable;
import io.rsocket.ConnectionSetupPayload;
import io.rsocket.Payload;
import io.rsocket.RSocket;
import io.rsocket.core.RSocketServer;
import io.rsocket.frame.ErrorFrameCodec;
import io.rsocket.frame.FrameHeaderCodec;
import io.rsocket.frame.FrameType;
import io.rsocket.frame.decoder.PayloadDecoder;
import io.rsocket.transport.netty.server.CloseableChannel;
import io.rsocket.transport.netty.server.TcpServerTransport;
import io.rsocket.transport.netty.server.WebsocketRouteTransport;
import io.rsocket.util.DefaultPayload;
import java.io.IOException;
import java.io.InputStream;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.netty.http.server.HttpServer;

/**
 * rsocket-java 1.1.5 demo server of the interop contract ({@code tests/interop/peers/README.md},
 * "Command lines", "Server events", "The demo responders").
 *
 * <pre>
 * java -cp rsocket-java-peer.jar rsocket_tx.interop.Server [--host H] [--port P] [--fragment N]
 *     [--completion frame] [--request-n K] [--timeout S] [--watch-stdin]
 *     [--transport tcp|ws] [--path /P]
 * </pre>
 *
 * Prints {@code LISTENING <port>}, then one JSON event per line. {@code --fragment N} is
 * {@code RSocketServer.fragment(N)} (N counts the whole frame with the 3-byte length prefix,
 * minimum 64). rsocket-java ends every stream with a separate PAYLOAD[C], so
 * {@code --completion flag} exits with code 3. {@code --transport ws}: {@code
 * WebsocketRouteTransport} answering WebSocket upgrades at {@code --path} only (default /).
 */
public final class Server {
  static final String INTERACTION_STREAM = "request-stream";
  static final String INTERACTION_CHANNEL = "request-channel";
  static final String NO_FLAG_COMPLETION =
      "rsocket-java ends a stream or channel with a separate PAYLOAD[C] (a Reactor onComplete"
          + " after the last onNext); it never sets C on a PAYLOAD with N";
  static final String MTU_MINIMUM =
      "rsocket-java refuses a fragment size (mtu) below 64 bytes; it counts the whole frame"
          + " including the 3-byte length prefix";

  private Server() {}

  public static void main(String[] argv) {
    Common.quietLogging();
    Map<String, Common.Kind> spec = new LinkedHashMap<>();
    Common.transportOptions(spec);
    spec.put("fragment", Common.Kind.INT);
    spec.put("completion", Common.Kind.STRING);
    spec.put("request-n", Common.Kind.INT);
    spec.put("timeout", Common.Kind.INT);
    spec.put("watch-stdin", Common.Kind.BOOL);
    Common.Args args;
    String transport;
    try {
      args = Common.Args.parse(Arrays.asList(argv), spec);
      transport = Common.transport(args);
      String completion = args.str("completion", "frame");
      if (!completion.equals("frame") && !completion.equals("flag")) {
        throw new Common.UsageError("--completion must be flag or frame");
      }
      if (completion.equals("flag")) {
        Common.finish(Common.Outcome.unsupported(NO_FLAG_COMPLETION));
      }
    } catch (Common.UsageError e) {
      Common.finish(Common.Outcome.failure("usage: " + e.getMessage()));
      return;
    }
    Integer fragment = args.integer("fragment");
    if (fragment != null && fragment < 64) {
      Common.finish(Common.Outcome.unsupported(MTU_MINIMUM));
    }
    int batch = args.integer("request-n", 256);
    String host = args.str("host", Common.HOST);
    int port = args.integer("port", 0);

    RSocketServer server =
        RSocketServer.create((setup, sendingSocket) -> accept(setup, batch))
            .payloadDecoder(PayloadDecoder.DEFAULT)
            .interceptors(registry -> registry.forConnection(new FrameSpy(Server::onFrame)));
    if (fragment != null) {
      server.fragment(fragment);
    }
    Closeable channel;
    int bound;
    if (transport.equals("tcp")) {
      CloseableChannel tcp = server.bind(TcpServerTransport.create(host, port)).block();
      channel = tcp;
      bound = tcp.address().getPort();
    } else {
      HttpServer http = HttpServer.create().host(host).port(port);
      CloseableChannel ws =
          (CloseableChannel)
              server.bind(new WebsocketRouteTransport(http, routes -> {}, Common.path(args)))
                  .block();
      channel = ws;
      bound = ws.address().getPort();
    }
    synchronized (System.out) {
      System.out.println("LISTENING " + bound);
      System.out.flush();
    }
    String reason = waitForStop(args.integer("timeout", 600), args.flag("watch-stdin"));
    emit(object("event", "stopping", "reason", reason));
    channel.dispose();
    System.exit(Common.EXIT_OK);
  }

  /** Wait for {@code timeout} seconds or, with {@code watchStdin}, stdin EOF; the reason. */
  static String waitForStop(int timeout, boolean watchStdin) {
    CompletableFuture<String> stop = new CompletableFuture<>();
    if (watchStdin) {
      Thread watcher =
          new Thread(
              () -> {
                InputStream in = System.in;
                byte[] buffer = new byte[256];
                try {
                  while (in.read(buffer) >= 0) {
                    // read until EOF
                  }
                } catch (IOException e) {
                  // treated as EOF
                }
                stop.complete("stdin closed");
              },
              "stdin-watch");
      watcher.setDaemon(true);
      watcher.start();
    }
    try {
      return stop.get(timeout, TimeUnit.SECONDS);
    } catch (TimeoutException e) {
      return "timeout";
    } catch (Exception e) {
      return "interrupted";
    }
  }

  /** Every received frame: an ERROR on stream 0 becomes an {@code error} event. */
  static void onFrame(ByteBuf frame) {
    if (FrameHeaderCodec.nativeFrameType(frame) == FrameType.ERROR
        && FrameHeaderCodec.streamId(frame) == 0) {
      emit(
          object(
              "event", "error",
              "code", ErrorFrameCodec.errorCode(frame),
              "message", ErrorFrameCodec.dataUtf8(frame)));
    }
  }

  /** The SocketAcceptor: report the SETUP; refuse it when its data says "reject:". */
  static Mono<RSocket> accept(ConnectionSetupPayload setup, int batch) {
    Map<String, Object> event = object("event", "setup");
    FrameSpy.Seen seen = FrameSpy.current();
    if (seen != null && seen.type() == FrameType.SETUP) {
      event.put("version", List.of(seen.major(), seen.minor()));
    }
    event.put("keepalive", setup.keepAliveInterval());
    event.put("lifetime", setup.keepAliveMaxLifetime());
    event.put("data_mime_type", setup.dataMimeType());
    event.put("metadata_mime_type", setup.metadataMimeType());
    event.put("lease", setup.willClientHonorLease());
    event.put("resume", setup.isResumeEnabled());
    byte[] data = Common.data(setup);
    event.putAll(describe(data, Common.metadata(setup), "both"));
    emit(event);
    String rejection = Common.rejectRequested(data);
    if (rejection != null) {
      emit(object("event", "setup_rejected", "message", rejection));
      // RSocketServer answers an acceptor error with ERROR[REJECTED_SETUP] and its message
      return Mono.error(new IllegalStateException(rejection));
    }
    return Mono.just(new DemoResponder(batch));
  }

  static void payloadEvent(String name, Payload payload, Object... extra) {
    Map<String, Object> event = object("event", name);
    event.putAll(object(extra));
    event.putAll(describe(payload, "both"));
    emit(event);
  }

  static Payload echo(Payload payload) {
    return DefaultPayload.create(Common.data(payload), Common.metadata(payload));
  }

  /** The demo responder: echo, count stream, echo channel; "error:" gives APPLICATION_ERROR. */
  static final class DemoResponder implements RSocket {
    private final int batch;

    DemoResponder(int batch) {
      this.batch = batch;
    }

    @Override
    public Mono<Payload> requestResponse(Payload payload) {
      payloadEvent("request", payload, "interaction", "request-response");
      String error = Common.errorRequested(Common.data(payload));
      if (error != null) {
        return Mono.error(new IllegalStateException(error));
      }
      return Mono.just(echo(payload));
    }

    @Override
    public Mono<Void> fireAndForget(Payload payload) {
      payloadEvent("fnf", payload);
      return Mono.empty();
    }

    @Override
    public Mono<Void> metadataPush(Payload payload) {
      Map<String, Object> event = object("event", "metadata_push");
      describe(new byte[0], Common.metadata(payload), "both")
          .forEach(
              (key, value) -> {
                if (key.startsWith("metadata")) {
                  event.put(key, value);
                }
              });
      emit(event);
      return Mono.empty();
    }

    @Override
    public Flux<Payload> requestStream(Payload payload) {
      payloadEvent("request", payload, "interaction", INTERACTION_STREAM);
      byte[] data = Common.data(payload);
      String error = Common.errorRequested(data);
      if (error != null) {
        return Flux.error(new IllegalStateException(error));
      }
      int count;
      try {
        count = Common.streamCount(data);
      } catch (IllegalArgumentException e) {
        return Flux.error(e);
      }
      AtomicBoolean first = new AtomicBoolean(true);
      AtomicInteger sent = new AtomicInteger();
      // Flux.range completes as soon as its last item is emitted, without waiting for credit
      return Flux.range(0, count)
          .map(i -> DefaultPayload.create(Integer.toString(i)))
          .doOnNext(p -> sent.incrementAndGet())
          .doOnRequest(
              n ->
                  emit(
                      object(
                          "event", "request_n",
                          "interaction", INTERACTION_STREAM,
                          "n", Common.requestN(n),
                          "initial", first.getAndSet(false))))
          .doOnCancel(
              () ->
                  emit(
                      object(
                          "event", "cancel",
                          "interaction", INTERACTION_STREAM,
                          "sent", sent.get())));
    }

    @Override
    public Flux<Payload> requestChannel(Publisher<Payload> payloads) {
      return new EchoChannel(payloads, batch);
    }
  }
}
