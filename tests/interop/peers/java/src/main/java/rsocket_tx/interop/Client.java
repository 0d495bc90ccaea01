package rsocket_tx.interop;

import static rsocket_tx.interop.Common.describe;
import static rsocket_tx.interop.Common.object;

import io.rsocket.Payload;
import io.rsocket.RSocket;
import io.rsocket.core.RSocketConnector;
import io.rsocket.frame.decoder.PayloadDecoder;
import io.rsocket.transport.ClientTransport;
import io.rsocket.transport.netty.client.TcpClientTransport;
import io.rsocket.transport.netty.client.WebsocketClientTransport;
import io.rsocket.util.DefaultPayload;
import java.net.URI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.reactivestreams.Publisher;
import org.reactivestreams.Subscription;
import reactor.core.publisher.BaseSubscriber;
import reactor.core.publisher.Flux;

/**
 * rsocket-java 1.1.5 demo client of the interop contract: runs ONE interaction and prints the
 * result as JSON ({@code tests/interop/peers/README.md}, "Command lines"; {@code peers.py}).
 *
 * <pre>
 * java -cp rsocket-java-peer.jar rsocket_tx.interop.Client INTERACTION --port P [--host H]
 *     [--data S | --data-b64 B | --data-size N] [--metadata S | --metadata-b64 B |
 *     --metadata-size N] [--request-n K] [--take M] [--count N] [--fragment N]
 *     [--completion frame] [--digest] [--timeout S] [--keepalive MS] [--lifetime MS]
 *     [--setup-data S] [--setup-metadata S] [--transport tcp|ws] [--path /P]
 * </pre>
 *
 * Streams and channels are consumed by a subscriber that calls {@code request(K)} exactly:
 * K first (the REQUEST_STREAM/CHANNEL initial n), then K after every K received. rsocket-java
 * completes a channel's outbound side with a separate PAYLOAD[C] (Reactor onComplete), so
 * {@code --completion flag} on a channel exits with code 3. Exit codes: 0 success, 1 the peer
 * sent ERROR, 2 usage/connection failure/timeout, 3 unsupported.
 *
 * <p>{@link ClientDaemon} runs the same {@link #run} for many command lines in one JVM.
 */
public final class Client {
  static final List<String> INTERACTIONS =
      List.of(
          "request-response", "fire-and-forget", "metadata-push", "request-stream",
          "request-channel");
  /** Error codes that only travel on stream 0 (the ERROR closed the connection). */
  static final Set<Integer> CONNECTION_ERRORS = Set.of(0x001, 0x002, 0x003, 0x004, 0x101, 0x102);
  /** How long the closing barrier ({@link FrameSpy.Spied#flush}) may wait for its echo. */
  static final Duration FLUSH_TIMEOUT = Duration.ofSeconds(5);

  private static final Map<String, Common.Kind> SPEC = new LinkedHashMap<>();

  static {
    Common.transportOptions(SPEC);
    for (String name :
        List.of(
            "data", "data-b64", "metadata", "metadata-b64", "completion", "setup-data",
            "setup-metadata")) {
      SPEC.put(name, Common.Kind.STRING);
    }
    for (String name :
        List.of(
            "data-size", "metadata-size", "request-n", "take", "count", "fragment", "timeout",
            "keepalive", "lifetime")) {
      SPEC.put(name, Common.Kind.INT);
    }
    SPEC.put("digest", Common.Kind.BOOL);
  }

  private Client() {}

  public static void main(String[] argv) {
    Common.quietLogging();
    Common.finish(run(Arrays.asList(argv)));
  }

  /** One parsed command line. */
  record Request(
      String interaction,
      String host,
      int port,
      String transport,
      String path,
      byte[] data,
      byte[] metadata,
      int requestN,
      Integer take,
      int count,
      Integer fragment,
      String completion,
      String mode,
      int timeout,
      int keepalive,
      int lifetime,
      String setupData,
      String setupMetadata) {}

  /** Run the command line {@code argv}; never throws. */
  static Common.Outcome run(List<String> argv) {
    Request request;
    try {
      request = parse(argv);
    } catch (Common.UsageError e) {
      return Common.Outcome.failure("usage: " + e.getMessage());
    }
    if (request.interaction().equals("request-channel")
        && request.completion().equals("flag")) {
      return Common.Outcome.unsupported(
          "rsocket-java completes the requester's channel side with a separate PAYLOAD[C]"
              + " (Reactor onComplete after the last onNext); it sets C on REQUEST_CHANNEL only"
              + " with leasing (completion before the lease allowed the first frame)");
    }
    if (request.fragment() != null && request.fragment() < 64) {
      return Common.Outcome.unsupported(Server.MTU_MINIMUM);
    }
    try {
      return connectAndRun(request);
    } catch (RuntimeException e) {
      return Common.Outcome.failure(e.getClass().getSimpleName() + ": " + e.getMessage());
    }
  }

  static Request parse(List<String> argv) throws Common.UsageError {
    Common.Args args = Common.Args.parse(argv, SPEC);
    if (args.positional.size() != 1 || !INTERACTIONS.contains(args.positional.get(0))) {
      throw new Common.UsageError("one INTERACTION expected, one of " + INTERACTIONS);
    }
    if (!args.has("port")) {
      throw new Common.UsageError("--port is required");
    }
    String completion = args.str("completion", "frame");
    if (!completion.equals("flag") && !completion.equals("frame")) {
      throw new Common.UsageError("--completion must be flag or frame");
    }
    int count = args.integer("count", 3);
    if (count < 1) {
      throw new Common.UsageError(
          "--count must be >= 1 (the first payload travels in REQUEST_CHANNEL)");
    }
    int requestN = args.integer("request-n", Common.MAX_REQUEST_N);
    if (requestN < 1) {
      throw new Common.UsageError("--request-n must be >= 1");
    }
    byte[] data;
    if (args.has("data-size")) {
      data = Common.pattern(args.integer("data-size"));
    } else if (args.has("data-b64")) {
      data = Base64.getDecoder().decode(args.str("data-b64", ""));
    } else {
      data = Common.utf8(args.str("data", ""));
    }
    byte[] metadata = null;
    if (args.has("metadata-size")) {
      metadata = Common.pattern(args.integer("metadata-size"));
    } else if (args.has("metadata-b64")) {
      metadata = Base64.getDecoder().decode(args.str("metadata-b64", ""));
    } else if (args.has("metadata")) {
      metadata = Common.utf8(args.str("metadata", ""));
    }
    boolean digest = args.flag("digest") || args.has("data-size") || args.has("metadata-size");
    return new Request(
        args.positional.get(0),
        args.str("host", Common.HOST),
        args.integer("port"),
        Common.transport(args),
        Common.path(args),
        data,
        metadata,
        requestN,
        args.integer("take"),
        count,
        args.integer("fragment"),
        completion,
        digest ? "digest" : "full",
        args.integer("timeout", 30),
        args.integer("keepalive", 20_000),
        args.integer("lifetime", 90_000),
        args.options.get("setup-data"),
        args.options.get("setup-metadata"));
  }

  private static long remaining(long deadline) {
    return Math.max(1, deadline - System.nanoTime());
  }

  static Common.Outcome connectAndRun(Request request) {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(request.timeout());
    FrameSpy spy = new FrameSpy(null);
    RSocketConnector connector =
        RSocketConnector.create()
            .dataMimeType(Common.OCTET_STREAM)
            .metadataMimeType(Common.OCTET_STREAM)
            .keepAlive(
                Duration.ofMillis(request.keepalive()), Duration.ofMillis(request.lifetime()))
            .payloadDecoder(PayloadDecoder.DEFAULT)
            .interceptors(registry -> registry.forConnection(spy));
    if (request.fragment() != null) {
      connector.fragment(request.fragment());
    }
    if (request.setupData() != null || request.setupMetadata() != null) {
      connector.setupPayload(
          DefaultPayload.create(
              Common.utf8(request.setupData() == null ? "" : request.setupData()),
              request.setupMetadata() == null ? null : Common.utf8(request.setupMetadata())));
    }
    ClientTransport transport =
        request.transport().equals("tcp")
            ? TcpClientTransport.create(request.host(), request.port())
            : WebsocketClientTransport.create(
                URI.create("ws://" + request.host() + ":" + request.port() + request.path()));
    RSocket rsocket;
    try {
      rsocket = connector.connect(transport).block(Duration.ofNanos(remaining(deadline)));
    } catch (RuntimeException e) {
      return Common.Outcome.failure("connection failed: " + e);
    }
    Map<String, Object> result = object("peer", Common.PEER, "interaction", request.interaction());
    try {
      int code = interact(rsocket, request, result, deadline);
      return new Common.Outcome(code, result);
    } catch (TimeoutException e) {
      return Common.Outcome.failure("timeout after " + request.timeout() + "s");
    } catch (Exception e) {
      return Common.Outcome.failure(e.getClass().getSimpleName() + ": " + e.getMessage());
    } finally {
      close(rsocket, spy);
    }
  }

  /** The barrier (see {@link FrameSpy.Spied#flush}), then dispose and wait for the close. */
  static void close(RSocket rsocket, FrameSpy spy) {
    FrameSpy.Spied connection = spy.last();
    if (connection != null && !rsocket.isDisposed()) {
      connection.flush(FLUSH_TIMEOUT);
    }
    rsocket.dispose();
    try {
      rsocket.onClose().block(Duration.ofSeconds(5));
    } catch (RuntimeException e) {
      // closed with an error, or not within 5 s: the process goes on (or ends) anyway
    }
  }

  private static Payload payload(byte[] data, byte[] metadata) {
    return DefaultPayload.create(data, metadata);
  }

  /** Run the interaction, filling {@code result}; the exit code (0, or 1 for an ERROR). */
  static int interact(RSocket rsocket, Request request, Map<String, Object> result, long deadline)
      throws Exception {
    Collector collector = null;
    try {
      switch (request.interaction()) {
        case "request-response" -> {
          Payload response =
              rsocket
                  .requestResponse(payload(request.data(), request.metadata()))
                  .toFuture()
                  .get(remaining(deadline), TimeUnit.NANOSECONDS);
          result.put("payload", response == null ? null : describe(response, request.mode()));
        }
        case "fire-and-forget" -> {
          rsocket
              .fireAndForget(payload(request.data(), request.metadata()))
              .toFuture()
              .get(remaining(deadline), TimeUnit.NANOSECONDS);
          result.put("sent", true);
        }
        case "metadata-push" -> {
          byte[] metadata = request.metadata() == null ? new byte[0] : request.metadata();
          rsocket
              .metadataPush(payload(new byte[0], metadata))
              .toFuture()
              .get(remaining(deadline), TimeUnit.NANOSECONDS);
          result.put("sent", true);
        }
        default -> {
          collector = new Collector(request.requestN(), request.take(), request.mode());
          Publisher<Payload> source;
          if (request.interaction().equals("request-stream")) {
            source = rsocket.requestStream(payload(request.data(), request.metadata()));
          } else {
            byte[] metadata = request.metadata();
            source =
                rsocket.requestChannel(
                    Flux.range(0, request.count())
                        .map(i -> payload(Common.utf8(Integer.toString(i)), metadata)));
          }
          source.subscribe(collector);
          collector.done.get(remaining(deadline), TimeUnit.NANOSECONDS);
          if (collector.error != null) {
            throw new ExecutionException(collector.error);
          }
          result.put("payloads", collector.payloads());
          result.put("completed", collector.completed);
          result.put("cancelled", collector.cancelled);
        }
      }
      return Common.EXIT_OK;
    } catch (ExecutionException e) {
      Map<String, Object> error = Common.errorOf(e.getCause());
      if (error == null) {
        throw e.getCause() instanceof Exception cause ? cause : e;
      }
      result.put("error", error);
      if (CONNECTION_ERRORS.contains((Integer) error.get("code"))) {
        result.put("connection_error", error);
      }
      if (collector != null) {
        result.put("payloads", collector.payloads());
      }
      return Common.EXIT_RSOCKET_ERROR;
    }
  }

  /**
   * Collects a stream or channel, calling {@code request(batch)} first and after every
   * {@code batch} payloads, cancelling after {@code take}.
   */
  static final class Collector extends BaseSubscriber<Payload> {
    final int batch;
    final Integer take;
    final String mode;
    final CompletableFuture<Void> done = new CompletableFuture<>();
    private final List<Map<String, Object>> payloads = new ArrayList<>();
    private int sinceRequest;
    volatile boolean completed;
    volatile boolean cancelled;
    volatile Throwable error;

    Collector(int batch, Integer take, String mode) {
      this.batch = batch;
      this.take = take;
      this.mode = mode;
    }

    synchronized List<Map<String, Object>> payloads() {
      return new ArrayList<>(payloads);
    }

    @Override
    protected void hookOnSubscribe(Subscription subscription) {
      subscription.request(batch);
    }

    @Override
    protected void hookOnNext(Payload value) {
      int received;
      synchronized (this) {
        payloads.add(describe(value, mode));
        received = payloads.size();
      }
      if (take != null && received >= take) {
        cancelled = true;
        cancel();
        done.complete(null);
      } else if (++sinceRequest >= batch) {
        sinceRequest = 0;
        request(batch);
      }
    }

    @Override
    protected void hookOnComplete() {
      completed = true;
      done.complete(null);
    }

    @Override
    protected void hookOnError(Throwable throwable) {
      error = throwable;
      done.complete(null);
    }
  }
}
