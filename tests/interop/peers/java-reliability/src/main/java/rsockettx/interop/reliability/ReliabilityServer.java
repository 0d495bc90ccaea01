package rsockettx.interop.reliability;

import io.rsocket.Payload;
import io.rsocket.RSocket;
import io.rsocket.core.RSocketServer;
import io.rsocket.core.Resume;
import io.rsocket.lease.Lease;
import io.rsocket.resume.InMemoryResumableFramesStore;
import io.rsocket.transport.netty.server.CloseableChannel;
import io.rsocket.transport.netty.server.TcpServerTransport;
import io.rsocket.util.DefaultPayload;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * rsocket-java 1.1.5 server for the reliability tests (resume, lease, keepalive).
 *
 * <pre>
 * java -cp rsocket-java-reliability.jar rsockettx.interop.reliability.ReliabilityServer
 *     [--port P] [--timeout S] [--watch-stdin] [--hold-client]
 *     [--resume [--session-duration MS] [--store-bytes B] [--cleanup-on-keepalive]]
 *     [--lease [--lease-requests N] [--lease-ttl MS] [--lease-interval MS] [--max-pending K]
 *              [--request-client K] [--request-wait MS] [--await-lease]]
 * </pre>
 *
 * Serves (every connection): request-response "echo:" + data; request-stream with data =
 * decimal N: "0" .. "N-1"; request-channel: echoes every item (the first one included).
 *
 * <p>--resume: {@code RSocketServer.resume(new Resume().sessionDuration(MS))} (default 60000)
 * with an in-memory frame store of B bytes (default 100000, the library's).  --lease:
 * {@code RSocketServer.lease(spec -> spec.sender(...).maxPendingRequests(K))}: grants N requests
 * (default 3) for MS (default 60000) once, or every --lease-interval MS; K (default 256, the
 * library's) is how many of the server's own requests wait for the client's lease.
 * --request-client K: after SETUP, the server sends K request-responses "s0" .. to the client,
 * one after another, each reported as a {@code result} event (payload, error, or "queued" when
 * no answer came within --request-wait MS, default 2000), then {@code results_done};
 * --await-lease: first wait (up to 10 s, else a {@code no_lease} event) until the requester's
 * availability is above 0, i.e. the client's first LEASE arrived.
 *
 * <p>--hold-client: after SETUP the server sends the client a request-response "hold" and
 * reports how it ended ({@code hold} event): a pending request fails with what closed the
 * connection (e.g. "No keep-alive acks for N ms", or ClosedChannelException when the peer
 * closed it).
 *
 * <p>Prints "LISTENING port", then JSON events: hold {n, payload, error, at_ms}, setup {n, lease, resume, keepalive_interval,
 * lifetime}, request {n, interaction, data}, lease_sent {n, ttl, requests}, stream_done {n,
 * sent}, channel_done {n, echoed}, cancel {n, interaction, sent}, result {n, index, payload |
 * error | queued}, results_done {n}, closed {n, error, after_ms, at_ms} (the connection's
 * requester closed: error null or {code, message, class}; at_ms: epoch ms), stopping.
 */
public final class ReliabilityServer {
  private static final AtomicInteger CONNECTIONS = new AtomicInteger();

  public static void main(String[] argv) {
    Common.Args args = new Common.Args(argv,
        Set.of("port", "timeout", "session-duration", "store-bytes", "lease-requests",
            "lease-ttl", "lease-interval", "max-pending", "request-client", "request-wait"),
        Set.of("watch-stdin", "resume", "cleanup-on-keepalive", "lease", "await-lease",
            "hold-client"));
    int port = args.integer("port", 0);
    Common.selfDestruct(args.integer("timeout", 600), "server");
    if (args.flag("watch-stdin")) {
      Common.watchStdin();
    }
    int requestClient = args.integer("request-client", 0);
    int requestWait = args.integer("request-wait", 2000);
    boolean awaitLease = args.flag("await-lease");
    boolean holdClient = args.flag("hold-client");

    RSocketServer server = RSocketServer.create((setup, requester) -> {
      int n = CONNECTIONS.incrementAndGet();
      long start = System.currentTimeMillis();
      Common.emit(Common.map("event", "setup", "n", n, "lease", setup.willClientHonorLease(),
          "resume", setup.isResumeEnabled(), "keepalive_interval", setup.keepAliveInterval(),
          "lifetime", setup.keepAliveMaxLifetime()));
      requester.onClose().subscribe(
          v -> { },
          e -> closed(n, start, e),
          () -> closed(n, start, null));
      if (holdClient) {
        // a request the client never answers: it fails with whatever ends the connection
        requester.requestResponse(DefaultPayload.create("hold")).subscribe(
            p -> Common.emit(Common.map("event", "hold", "n", n, "payload", p.getDataUtf8(),
                "error", null, "at_ms", System.currentTimeMillis())),
            e -> Common.emit(Common.map("event", "hold", "n", n, "payload", null,
                "error", Common.error(e), "at_ms", System.currentTimeMillis())));
      }
      if (requestClient > 0) {
        Thread t = new Thread(
            () -> askClient(n, requester, requestClient, requestWait, awaitLease),
            "request-client-" + n);
        t.setDaemon(true);
        t.start();
      }
      return Mono.just(new Handler(n));
    });
    if (args.flag("resume")) {
      int storeBytes = args.integer("store-bytes", 100_000);
      Resume resume = new Resume()
          .sessionDuration(Duration.ofMillis(args.integer("session-duration", 60_000)))
          .storeFactory(token -> new InMemoryResumableFramesStore("server", token, storeBytes));
      if (args.flag("cleanup-on-keepalive")) {
        resume.cleanupStoreOnKeepAlive();
      }
      server.resume(resume);
    }
    if (args.flag("lease")) {
      int requests = args.integer("lease-requests", 3);
      int ttl = args.integer("lease-ttl", 60_000);
      int interval = args.integer("lease-interval", 0);
      int maxPending = args.integer("max-pending", 256);
      server.lease(spec -> spec.maxPendingRequests(maxPending).sender(() -> {
        Flux<Long> ticks = interval > 0
            ? Flux.interval(Duration.ZERO, Duration.ofMillis(interval))
            : Flux.just(0L).concatWith(Flux.never());
        return ticks.map(i -> {
          Common.emit(Common.map("event", "lease_sent", "n", CONNECTIONS.get(), "ttl", ttl,
              "requests", requests));
          return Lease.create(Duration.ofMillis(ttl), requests);
        });
      }));
    }
    CloseableChannel channel;
    try {
      channel = server.bind(TcpServerTransport.create(Common.HOST, port))
          .block(Duration.ofSeconds(30));
    } catch (RuntimeException e) {
      Common.fail("cannot listen: " + e);
      return;
    }
    Common.println("LISTENING " + channel.address().getPort());
    channel.onClose().block();
  }

  private static void closed(int n, long start, Throwable e) {
    long now = System.currentTimeMillis();
    Common.emit(Common.map("event", "closed", "n", n, "error", e == null ? null : Common.error(e),
        "after_ms", now - start, "at_ms", now));
  }

  /** The server's requester: ``count`` request-responses to the client, one after another. */
  private static void askClient(int n, RSocket requester, int count, int waitMs,
                                boolean awaitLease) {
    if (awaitLease) {
      long start = System.nanoTime();
      while (requester.availability() <= 0) {
        if (System.nanoTime() - start > 10_000_000_000L) {
          Common.emit(Common.map("event", "no_lease", "n", n));
          break;
        }
        try {
          Thread.sleep(5);
        } catch (InterruptedException e) {
          return;
        }
      }
    }
    for (int i = 0; i < count; i++) {
      Map<String, Object> result = Common.map("event", "result", "n", n, "index", i);
      try {
        Payload reply = requester.requestResponse(DefaultPayload.create("s" + i))
            .block(Duration.ofMillis(waitMs));
        result.put("payload", reply == null ? null : reply.getDataUtf8());
      } catch (IllegalStateException e) {
        if (String.valueOf(e.getMessage()).startsWith("Timeout on blocking read")) {
          result.put("queued", true);
        } else {
          result.put("error", Common.error(e));
        }
      } catch (RuntimeException e) {
        result.put("error", Common.error(e));
      }
      Common.emit(result);
    }
    Common.emit(Common.map("event", "results_done", "n", n));
  }

  /** The responder of one connection. */
  static final class Handler implements RSocket {
    private final int n;

    Handler(int n) {
      this.n = n;
    }

    @Override
    public Mono<Payload> requestResponse(Payload payload) {
      String data = payload.getDataUtf8();
      payload.release();
      Common.emit(Common.map("event", "request", "n", n, "interaction", "request-response",
          "data", data));
      return Mono.just(DefaultPayload.create("echo:" + data));
    }

    @Override
    public Flux<Payload> requestStream(Payload payload) {
      String data = payload.getDataUtf8();
      payload.release();
      Common.emit(Common.map("event", "request", "n", n, "interaction", "request-stream",
          "data", data));
      int count;
      try {
        count = Integer.parseInt(data.trim());
      } catch (NumberFormatException e) {
        return Flux.error(new IllegalArgumentException("data must be a decimal count"));
      }
      AtomicInteger sent = new AtomicInteger();
      return Flux.range(0, count)
          .map(i -> DefaultPayload.create(Integer.toString(i)))
          .doOnNext(p -> sent.incrementAndGet())
          .doOnComplete(() -> Common.emit(Common.map("event", "stream_done", "n", n,
              "sent", sent.get())))
          .doOnCancel(() -> Common.emit(Common.map("event", "cancel", "n", n,
              "interaction", "request-stream", "sent", sent.get())));
    }

    @Override
    public Flux<Payload> requestChannel(Publisher<Payload> payloads) {
      AtomicInteger echoed = new AtomicInteger();
      return Flux.from(payloads)
          .map(p -> {
            String data = p.getDataUtf8();
            p.release();
            return DefaultPayload.create(data);
          })
          .doOnNext(p -> echoed.incrementAndGet())
          .doOnComplete(() -> Common.emit(Common.map("event", "channel_done", "n", n,
              "echoed", echoed.get())))
          .doOnCancel(() -> Common.emit(Common.map("event", "cancel", "n", n,
              "interaction", "request-channel", "sent", echoed.get())));
    }
  }
}
