package rsockettx.interop.reliability;

import io.rsocket.Payload;
import io.rsocket.RSocket;
import io.rsocket.core.RSocketConnector;
import io.rsocket.transport.netty.client.TcpClientTransport;
import io.rsocket.util.DefaultPayload;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * rsocket-java 1.1.5 client that connects with {@code keepAlive(interval, maxLifetime)}, makes
 * one request-response ("ping"), sends a second one ("hold") that the server is expected never
 * to answer, and waits until the connection closes: what closes it, and when.
 *
 * <pre>
 * java -cp rsocket-java-reliability.jar rsockettx.interop.reliability.KeepaliveClient
 *     --port P [--keepalive MS] [--lifetime MS] [--timeout S]
 * </pre>
 *
 * Keepalive / lifetime default 500 / 5000 ms.  Prints one JSON line: {"peer", "ping": reply
 * data, "connected_at_ms", "closed_at_ms" (epoch ms, when {@code onClose()} ended),
 * "after_ms" (since connected), "error": how "hold" failed {code, message, class} | null,
 * "close_error": how {@code onClose()} ended (null: completed)} with exit code 1 when "hold"
 * failed, 0 otherwise; {"failure"} (2): usage, connection failure, timeout.
 */
public final class KeepaliveClient {
  public static void main(String[] argv) {
    Common.Args args = new Common.Args(argv,
        Set.of("host", "port", "keepalive", "lifetime", "timeout"), Set.of());
    if (!args.options.containsKey("port")) {
      Common.usage("--port is required");
    }
    Common.selfDestruct(args.integer("timeout", 60), "keepalive client");
    RSocket rsocket;
    Map<String, Object> result = Common.map("peer", Common.PEER);
    try {
      rsocket = RSocketConnector.create()
          .keepAlive(Duration.ofMillis(args.integer("keepalive", 500)),
              Duration.ofMillis(args.integer("lifetime", 5000)))
          .connect(TcpClientTransport.create(args.str("host", Common.HOST),
              args.integer("port", 0)))
          .block(Duration.ofSeconds(30));
      Payload reply = rsocket.requestResponse(DefaultPayload.create("ping"))
          .block(Duration.ofSeconds(30));
      result.put("ping", reply == null ? null : reply.getDataUtf8());
    } catch (RuntimeException e) {
      Common.fail("cannot connect or ping: " + e);
      return;
    }
    long connected = System.currentTimeMillis();
    result.put("connected_at_ms", connected);
    // a request the server never answers ("hold"): it fails with whatever ends the connection
    CompletableFuture<Throwable> hold = new CompletableFuture<>();
    rsocket.requestResponse(DefaultPayload.create("hold")).subscribe(
        p -> hold.complete(null), hold::complete, () -> hold.complete(null));
    Throwable closeError = null;
    try {
      rsocket.onClose().block();
    } catch (RuntimeException e) {
      closeError = e;
    }
    long closed = System.currentTimeMillis();
    Throwable error;
    try {
      error = hold.get(5, TimeUnit.SECONDS);
    } catch (Exception e) {
      error = new IllegalStateException("the held request did not end within 5 s of onClose()");
    }
    result.put("closed_at_ms", closed);
    result.put("after_ms", closed - connected);
    result.put("close_error", closeError == null ? null : Common.error(closeError));
    result.put("error", error == null ? null : Common.error(error));
    Common.finish(result, error == null ? Common.EXIT_OK : Common.EXIT_RSOCKET_ERROR);
  }
}
