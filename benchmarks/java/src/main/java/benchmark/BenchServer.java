package benchmark;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.rsocket.Payload;
import io.rsocket.RSocket;
import io.rsocket.core.RSocketServer;
import io.rsocket.frame.decoder.PayloadDecoder;
import io.rsocket.transport.netty.server.CloseableChannel;
import io.rsocket.util.ByteBufPayload;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The benchmark application on rsocket-java's RSocketServer (the contract of
 * benchmarks/common.py):
 *
 * <ul>
 *   <li>request-response: data "count" answers the decimal number of fire-and-forget messages
 *       this connection has delivered so far; any other data is echoed back (the received
 *       payload itself is sent back: zero copy);
 *   <li>request-stream: data "n:size" answers n items of size bytes (views of one buffer), then
 *       complete, honouring the requester's request-n through Reactor's back-pressure;
 *   <li>fire-and-forget: counted per connection.
 * </ul>
 *
 * Payloads are decoded with {@link PayloadDecoder#ZERO_COPY} (slices of the received frames, as
 * rsocket-java's own benchmarks do), so every handler releases what it does not send back.
 */
final class BenchServer {
  static final ByteBuf COUNT_QUERY =
      Unpooled.unreleasableBuffer(
          Unpooled.wrappedBuffer("count".getBytes(StandardCharsets.US_ASCII)));

  private BenchServer() {}

  /** One connection's responder. */
  static final class Handler implements RSocket {
    /**
     * Fire-and-forget messages received on this connection. All calls of one connection run on
     * its Netty event loop; volatile only makes the count safe to read from anywhere.
     */
    private volatile long fnfCount;

    @Override
    public Mono<Void> fireAndForget(Payload payload) {
      fnfCount++; // one writer: the connection's event loop
      payload.release();
      return Mono.empty();
    }

    @Override
    public Mono<Payload> requestResponse(Payload payload) {
      if (payload.data().equals(COUNT_QUERY)) {
        payload.release();
        return Mono.just(ByteBufPayload.create(Long.toString(fnfCount)));
      }
      return Mono.just(payload); // echo; released by rsocket-java once encoded
    }

    @Override
    public Flux<Payload> requestStream(Payload payload) {
      String request = payload.getDataUtf8();
      payload.release();
      int colon = request.indexOf(':');
      int n = Integer.parseInt(request.substring(0, colon));
      int size = Integer.parseInt(request.substring(colon + 1));
      return Flux.using(
          () -> filled(size),
          item -> Flux.range(0, n).map(i -> ByteBufPayload.create(item.retainedDuplicate())),
          ByteBuf::release);
    }
  }

  /** A direct buffer of {@code size} bytes 'x' (refCnt 1). */
  static ByteBuf filled(int size) {
    ByteBuf buf = ByteBufAllocator.DEFAULT.directBuffer(size, size);
    while (buf.isWritable()) {
      buf.writeByte('x');
    }
    return buf;
  }

  static void run() {
    String kind = Transports.kind();
    CloseableChannel channel;
    try {
      channel =
          RSocketServer.create((setup, sendingSocket) -> Mono.just(new Handler()))
              .payloadDecoder(PayloadDecoder.ZERO_COPY)
              .bind(Transports.server(kind))
              .block(Duration.ofSeconds(30));
    } catch (Throwable t) {
      announce("UNAVAILABLE rsocket-java server failed: " + Main.describe(t));
      System.exit(1);
      return;
    }
    int port = channel.address().getPort();
    double warmupSeconds = envSeconds("BENCH_JVM_SERVER_WARMUP_S", 3.0);
    if (warmupSeconds > 0) {
      try {
        BenchClient.warmUpServer(kind, port, warmupSeconds);
      } catch (Throwable t) {
        System.err.println("server warm-up failed (ignored): " + Main.describe(t));
      }
    }
    announce("PORT " + port);
    channel.onClose().block(); // until the orchestrator closes stdin (see Main)
  }

  static void announce(String line) {
    System.out.println(line);
    System.out.flush();
  }

  static double envSeconds(String name, double fallback) {
    String value = System.getenv(name);
    return value == null || value.isEmpty() ? fallback : Double.parseDouble(value);
  }
}
