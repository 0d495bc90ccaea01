package rsockettx.interop.reliability;

import io.rsocket.Payload;
import io.rsocket.RSocket;
import io.rsocket.core.RSocketConnector;
import io.rsocket.core.Resume;
import io.rsocket.resume.InMemoryResumableFramesStore;
import io.rsocket.transport.netty.client.TcpClientTransport;
import io.rsocket.util.DefaultPayload;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import reactor.core.publisher.Flux;
import reactor.util.retry.Retry;

/**
 * rsocket-java 1.1.5 client WITH RESUME: one request-stream or request-channel of N items,
 * checked item by item, surviving transport failures by resuming.
 *
 * <pre>
 * java -cp rsocket-java-reliability.jar rsockettx.interop.reliability.ResumeClient
 *     request-stream|request-channel --port P [--count N] [--request-n K] [--keepalive MS]
 *     [--lifetime MS] [--reconnect-delay MS] [--max-reconnects N] [--session-duration MS]
 *     [--store-bytes B] [--cleanup-on-keepalive] [--timeout S]
 * </pre>
 *
 * request-stream: REQUEST_STREAM with data = decimal N, expects "0" .. "N-1".  request-channel:
 * sends "0" .. "N-1" (the first in REQUEST_CHANNEL), expects them echoed.  --request-n K: the
 * credit batch ({@code limitRate(K)}, default 256).  Resume: {@code RSocketConnector.resume(new
 * Resume().retry(Retry.fixedDelay(N, MS)))}: after every transport failure it reconnects to the
 * same address after --reconnect-delay ms (default 50), at most --max-reconnects times in a row
 * (default 100); the session lasts --session-duration ms without a connection (default
 * 60000).  Keepalive / lifetime default 500 / 30000 ms.  Frame store B bytes (default 100000,
 * the library's).
 *
 * <p>Prints one JSON line and exits: 0 {"peer", "interaction", "count", "received", "in_order":
 * true, "completed": true, "reconnect_attempts"}; 1 the same plus "error" {code, message,
 * class} (the stream failed) and "close_error" (how {@code rsocket.onClose()} ended: null, or
 * {code, message, class}; the stream itself only ever sees a ClosedChannelException when the
 * session ends), or "in_order": false with "first_bad" {index, data}, or "completed": false;
 * 2 {"failure"}: usage, timeout.
 */
public final class ResumeClient {
  public static void main(String[] argv) throws InterruptedException {
    Common.Args args = new Common.Args(argv,
        Set.of("host", "port", "count", "request-n", "keepalive", "lifetime", "reconnect-delay",
            "max-reconnects", "session-duration", "store-bytes", "timeout"),
        Set.of("cleanup-on-keepalive"));
    if (args.positional.size() != 1 || !Set.of("request-stream", "request-channel")
        .contains(args.positional.get(0))) {
      Common.usage("one interaction expected: request-stream or request-channel");
    }
    if (!args.options.containsKey("port")) {
      Common.usage("--port is required");
    }
    String interaction = args.positional.get(0);
    int count = args.integer("count", 1000);
    int requestN = args.integer("request-n", 256);
    int storeBytes = args.integer("store-bytes", 100_000);
    Common.selfDestruct(args.integer("timeout", 60), "resume client");

    AtomicInteger attempts = new AtomicInteger();
    Resume resume = new Resume()
        .sessionDuration(Duration.ofMillis(args.integer("session-duration", 60_000)))
        .storeFactory(token -> new InMemoryResumableFramesStore("client", token, storeBytes))
        .retry(Retry.fixedDelay(args.integer("max-reconnects", 100),
                Duration.ofMillis(args.integer("reconnect-delay", 50)))
            .doBeforeRetry(signal -> attempts.incrementAndGet()));
    if (args.flag("cleanup-on-keepalive")) {
      resume.cleanupStoreOnKeepAlive();
    }
    RSocket rsocket;
    try {
      rsocket = RSocketConnector.create()
          .keepAlive(Duration.ofMillis(args.integer("keepalive", 500)),
              Duration.ofMillis(args.integer("lifetime", 30_000)))
          .resume(resume)
          .connect(TcpClientTransport.create(args.str("host", Common.HOST),
              args.integer("port", 0)))
          .block(Duration.ofSeconds(30));
    } catch (RuntimeException e) {
      Common.fail("cannot connect: " + e);
      return;
    }

    Flux<Payload> items = interaction.equals("request-stream")
        ? rsocket.requestStream(DefaultPayload.create(Integer.toString(count)))
        : rsocket.requestChannel(Flux.range(0, count)
            .map(i -> DefaultPayload.create(Integer.toString(i))));

    Map<String, Object> result = Common.map("peer", Common.PEER, "interaction", interaction,
        "count", count);
    AtomicInteger received = new AtomicInteger();
    boolean[] inOrder = {true};
    boolean[] completed = {false};
    Throwable[] error = {null};
    CountDownLatch done = new CountDownLatch(1);
    items.limitRate(requestN).subscribe(
        p -> {
          String data = p.getDataUtf8();
          p.release();
          int index = received.getAndIncrement();
          if (inOrder[0] && !data.equals(Integer.toString(index))) {
            inOrder[0] = false;
            result.put("first_bad", Common.map("index", index, "data", data));
          }
        },
        e -> {
          error[0] = e;
          done.countDown();
        },
        () -> {
          completed[0] = true;
          done.countDown();
        });
    done.await();
    result.put("received", received.get());
    result.put("in_order", inOrder[0]);
    result.put("completed", completed[0]);
    result.put("reconnect_attempts", attempts.get());
    if (error[0] != null) {
      result.put("error", Common.error(error[0]));
      // the stream fails with the requester's ClosedChannelException; what ended the
      // session (e.g. the server's REJECTED_RESUME) is only on rsocket.onClose()
      try {
        rsocket.onClose().block(Duration.ofSeconds(5));
        result.put("close_error", null);
      } catch (IllegalStateException e) {
        result.put("close_error", Common.map("message", "onClose() still open after 5 s"));
      } catch (RuntimeException e) {
        result.put("close_error", Common.error(e));
      }
    }
    boolean ok = error[0] == null && inOrder[0] && completed[0] && received.get() == count;
    Common.finish(result, ok ? Common.EXIT_OK : Common.EXIT_RSOCKET_ERROR);
  }
}
