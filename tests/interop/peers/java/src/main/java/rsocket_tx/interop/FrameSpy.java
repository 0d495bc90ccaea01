package rsocket_tx.interop;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.rsocket.DuplexConnection;
import io.rsocket.RSocketErrorException;
import io.rsocket.frame.FrameHeaderCodec;
import io.rsocket.frame.FrameType;
import io.rsocket.frame.KeepAliveFrameCodec;
import io.rsocket.frame.SetupFrameCodec;
import io.rsocket.plugins.DuplexConnectionInterceptor;
import java.net.SocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * A {@code SOURCE} connection interceptor that looks at every received frame before
 * rsocket-java handles it.
 *
 * <p>rsocket-java hands the application Reactive Streams signals only: it does not say whether
 * a channel's inbound side completed with C on REQUEST_CHANNEL, on a PAYLOAD with N, or with a
 * PAYLOAD[C] alone, nor which SETUP version arrived. Netty handles a connection's frames on one
 * event-loop thread, one after the other, and rsocket-java calls the responder synchronously
 * while it handles a frame, so {@link #current()} (a thread local set just before the frame is
 * passed on) is the frame that caused the callback being run.
 *
 * <p>Client side, {@link Spied#flush} is the harness's barrier before closing (rsocket-java's
 * {@code dispose()} closes the channel at once, dropping queued frames such as a
 * fire-and-forget or a CANCEL).
 */
final class FrameSpy implements DuplexConnectionInterceptor {
  /** A received frame: native type (PAYLOAD, not NEXT/COMPLETE), flags, stream id. */
  record Seen(FrameType type, int flags, int streamId, int major, int minor) {
    boolean has(int flag) {
      return (flags & flag) == flag;
    }

    boolean isPayload() {
      return type == FrameType.PAYLOAD;
    }
  }

  private static final ThreadLocal<Seen> CURRENT = new ThreadLocal<>();
  private static final String FLUSH_MARKER = "rsocket_tx interop flush ";
  private static final AtomicInteger FLUSHES = new AtomicInteger();

  private final Consumer<ByteBuf> onFrame;
  private volatile Spied last;

  /** @param onFrame called with every received frame (may be null). */
  FrameSpy(Consumer<ByteBuf> onFrame) {
    this.onFrame = onFrame;
  }

  /** The frame being handled on this thread (null outside a frame's handling). */
  static Seen current() {
    return CURRENT.get();
  }

  /** The connection this interceptor wrapped last (a client makes one). */
  Spied last() {
    return last;
  }

  @Override
  public DuplexConnection apply(Type type, DuplexConnection connection) {
    if (type != Type.SOURCE) {
      return connection;
    }
    Spied spied = new Spied(connection);
    last = spied;
    return spied;
  }

  /** The wrapped SOURCE connection. */
  final class Spied implements DuplexConnection {
    private final DuplexConnection delegate;
    private volatile CompletableFuture<Void> flushed;
    private volatile String flushData;

    Spied(DuplexConnection delegate) {
      this.delegate = delegate;
    }

    private void seen(ByteBuf frame) {
      FrameType type = FrameHeaderCodec.nativeFrameType(frame);
      int major = -1;
      int minor = -1;
      if (type == FrameType.SETUP) {
        int version = SetupFrameCodec.version(frame);
        major = version >>> 16;
        minor = version & 0xFFFF;
      }
      CURRENT.set(
          new Seen(type, FrameHeaderCodec.flags(frame), FrameHeaderCodec.streamId(frame), major,
              minor));
      if (type == FrameType.KEEPALIVE && !KeepAliveFrameCodec.respondFlag(frame)) {
        CompletableFuture<Void> waiting = flushed;
        String data = KeepAliveFrameCodec.data(frame).toString(StandardCharsets.UTF_8);
        if (waiting != null && data.equals(flushData)) {
          waiting.complete(null);
        }
      }
      if (onFrame != null) {
        onFrame.accept(frame);
      }
    }

    /**
     * Send a KEEPALIVE[R] with unique data behind every frame already queued (it goes into the
     * normal queue, not the prioritized one of stream 0) and wait until the peer echoes it: the
     * peer then has received everything sent before. Gives up silently after {@code timeout}.
     *
     * @return whether the echo arrived in time.
     */
    boolean flush(Duration timeout) {
      if (delegate.isDisposed()) {
        return false;
      }
      String data = FLUSH_MARKER + FLUSHES.incrementAndGet();
      CompletableFuture<Void> waiting = new CompletableFuture<>();
      flushData = data;
      flushed = waiting;
      ByteBufAllocator alloc = delegate.alloc();
      ByteBuf frame =
          KeepAliveFrameCodec.encode(alloc, true, 0, alloc.buffer().writeBytes(Common.utf8(data)));
      delegate.sendFrame(1, frame);
      try {
        waiting.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
        return true;
      } catch (Exception e) {
        return false;
      }
    }

    @Override
    public void sendFrame(int streamId, ByteBuf frame) {
      delegate.sendFrame(streamId, frame);
    }

    @Override
    public void sendErrorAndClose(RSocketErrorException errorException) {
      delegate.sendErrorAndClose(errorException);
    }

    @Override
    public Flux<ByteBuf> receive() {
      return delegate.receive().doOnNext(this::seen);
    }

    @Override
    public ByteBufAllocator alloc() {
      return delegate.alloc();
    }

    @Override
    public SocketAddress remoteAddress() {
      return delegate.remoteAddress();
    }

    @Override
    public Mono<Void> onClose() {
      return delegate.onClose();
    }

    @Override
    public void dispose() {
      delegate.dispose();
    }

    @Override
    public boolean isDisposed() {
      return delegate.isDisposed();
    }
  }
}
