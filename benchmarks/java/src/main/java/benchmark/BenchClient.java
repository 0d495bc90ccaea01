package benchmark;

import io.netty.buffer.ByteBuf;
import io.rsocket.Payload;
import io.rsocket.RSocket;
import io.rsocket.core.RSocketConnector;
import io.rsocket.frame.decoder.PayloadDecoder;
import io.rsocket.util.ByteBufPayload;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import org.reactivestreams.Subscription;
import reactor.core.publisher.BaseSubscriber;
import reactor.core.publisher.Flux;

/**
 * The benchmark workloads on rsocket-java's RSocketConnector (what benchmarks/common.py and the
 * Python clients do, written the Reactor way):
 *
 * <ul>
 *   <li>rr: {@code Flux.range(...).flatMap(i -> rs.requestResponse(p), inflight)}: at most
 *       {@code inflight} requests outstanding (1: sequential), a new one issued as each answer
 *       arrives, until {@code count} or the time budget (checked every 64 answers);
 *   <li>stream: one requestStream consumed by a {@link BaseSubscriber} that requests {@code
 *       prefetch} items up front and half the window each time half of it arrived (as the
 *       other clients do); cancels when the budget is spent (checked every 256 items);
 *   <li>fnf: fireAndForget in batches of 1000 (the budget is checked between batches), each
 *       batch issued on the connection's event loop from the answer to a "count" query, then
 *       "count" request-responses until the server has received them all; the clock stops at
 *       that answer.
 * </ul>
 *
 * Payloads are ByteBuf views of one buffer (sent without copying); answers are released after
 * counting. A JVM needs warm-up before its steady state: see {@link #warmUp} and
 * benchmarks/README.md.
 */
final class BenchClient {
  private BenchClient() {}

  /** A measured run's outcome (benchmarks.common.RunResult). */
  record RunResult(long ops, long nbytes, double seconds, boolean complete) {
    double rate() {
      return ops / Math.max(seconds, 1e-9);
    }

    /** The JSON of RunResult; {@code extra} is a JSON object text. */
    String toJson(String extra) {
      return String.format(
          Locale.ROOT,
          "{\"ops\": %d, \"nbytes\": %d, \"seconds\": %.9f, \"complete\": %s, \"extra\": %s}",
          ops,
          nbytes,
          seconds,
          complete,
          extra);
    }
  }

  /** Seconds of one warm-up slice (a run of the workload cut short by this budget). */
  static final double SLICE_S = 0.5;

  /** Soft time budget of one run. */
  static final class Deadline {
    final long start = System.nanoTime();
    final long end;

    Deadline(double budgetSeconds) {
      end = start + (long) (budgetSeconds * 1e9);
    }

    boolean passed() {
      return System.nanoTime() - end >= 0;
    }

    double elapsed() {
      return (System.nanoTime() - start) / 1e9;
    }
  }

  /** Per-connection state: fire-and-forget messages sent so far (all runs). */
  static final class State {
    long fnfExpected;
  }

  static RSocket connect(String kind, int port) throws Exception {
    return RSocketConnector.create()
        .payloadDecoder(PayloadDecoder.ZERO_COPY)
        .dataMimeType("application/octet-stream")
        .metadataMimeType("application/octet-stream")
        .connect(Transports.client(kind, port))
        .block(Duration.ofSeconds(20));
  }

  static void run(int port, Spec spec) {
    String body;
    RSocket rs = null;
    try {
      rs = connect(Transports.kind(), port);
      State state = new State();
      String warmup = "{}";
      if (spec.warmup > 0) {
        warmup = warmUp(rs, spec, state);
      }
      List<String> runs = new ArrayList<>();
      for (int i = 0; i < spec.repeat; i++) {
        runs.add(runOnce(rs, spec, spec.count, state).toJson(warmup));
      }
      body = "{\"ok\": true, \"runs\": [" + String.join(", ", runs) + "]}";
    } catch (Throwable t) {
      body = "{\"ok\": false, \"error\": \"" + Main.describe(t).replace("\\", "\\\\")
          .replace("\"", "'") + "\"}";
    }
    BenchServer.announce("RESULT " + body);
    if (rs != null) {
      rs.dispose();
    }
    System.exit(0);
  }

  /**
   * The JVM's warm-up before the measured run: the workload's warm-up run (what every client
   * does), then slices of the workload ({@link #SLICE_S} seconds each) until the JIT compiler
   * has settled: at least BENCH_JVM_WARMUP_MIN_S seconds (default 2) and then until two
   * slices in a row are no more than 5% faster than the best slice before them, at most
   * BENCH_JVM_WARMUP_S seconds (default 8).
   *
   * @return a JSON object (the measured run's "extra"): warm-up seconds, slices, last rate/s
   */
  static String warmUp(RSocket rs, Spec spec, State state) throws Exception {
    double min = BenchServer.envSeconds("BENCH_JVM_WARMUP_MIN_S", 2.0);
    double max = BenchServer.envSeconds("BENCH_JVM_WARMUP_S", 8.0);
    Deadline total = new Deadline(max);
    Spec slice = spec.withCount(spec.count);
    slice.budget = SLICE_S;
    runOnce(rs, spec, spec.warmup, state);
    double best = 0;
    double last = 0;
    int flat = 0;
    int slices = 0;
    while (!total.passed() && flat < 2) {
      last = runOnce(rs, slice, slice.count, state).rate();
      slices++;
      boolean settled = total.elapsed() >= min && last <= best * 1.05;
      flat = settled ? flat + 1 : 0;
      best = Math.max(best, last);
    }
    return String.format(
        Locale.ROOT,
        "{\"jvm_warmup_s\": %.3f, \"jvm_warmup_slices\": %d, \"jvm_warmup_last_rate\": %.1f}",
        total.elapsed(),
        slices,
        last);
  }

  /**
   * Warm the server's JVM up before it announces its port: an in-process client runs each
   * workload kind against it for about {@code seconds} in total.
   */
  static void warmUpServer(String kind, int port, double seconds) throws Exception {
    RSocket rs = connect(kind, port);
    try {
      State state = new State();
      double each = seconds / 4;
      runOnce(rs, spec("rr", 1_000_000, 64, 100, 256, each), Integer.MAX_VALUE, state);
      runOnce(rs, spec("stream", 10_000_000, 64, 1, 256, each), 10_000_000, state);
      runOnce(rs, spec("fnf", 1_000_000, 64, 1, 256, each), 1_000_000, state);
      runOnce(rs, spec("stream", 1_000, 1 << 20, 1, 16, each), 1_000, state);
    } finally {
      rs.dispose();
    }
  }

  private static Spec spec(String kind, int count, int size, int inflight, int prefetch,
      double budget) {
    Spec s = new Spec();
    s.name = "warm-up";
    s.kind = kind;
    s.count = count;
    s.size = size;
    s.inflight = inflight;
    s.prefetch = prefetch;
    s.budget = budget;
    return s;
  }

  static RunResult runOnce(RSocket rs, Spec spec, int count, State state) throws Exception {
    Deadline deadline = new Deadline(spec.budget);
    switch (spec.kind) {
      case "rr":
        return requestResponse(rs, spec, count, deadline);
      case "stream":
        return requestStream(rs, spec, count, deadline);
      case "fnf":
        return fireAndForget(rs, spec, count, deadline, state);
      default:
        throw new IllegalArgumentException("unknown workload kind " + spec.kind);
    }
  }

  // ------------------------------------------------------------------ request-response

  private static final class Replies {
    long got;
    long nbytes;
    volatile boolean stop;
  }

  static RunResult requestResponse(RSocket rs, Spec spec, int count, Deadline deadline) {
    ByteBuf request = BenchServer.filled(spec.size);
    Replies r = new Replies();
    try {
      Flux.range(0, count)
          .takeWhile(i -> !r.stop)
          .flatMap(
              i -> rs.requestResponse(ByteBufPayload.create(request.retainedSlice())),
              Math.max(1, Math.min(spec.inflight, count)))
          .doOnNext(
              reply -> {
                r.got++;
                r.nbytes += reply.data().readableBytes();
                reply.release();
                if ((r.got & 63) == 0 && deadline.passed()) {
                  r.stop = true;
                }
              })
          .blockLast();
    } finally {
      request.release();
    }
    return new RunResult(r.got, r.nbytes, deadline.elapsed(), r.got == count);
  }

  // ------------------------------------------------------------------ request-stream

  /** Counts items, re-requests half the window each time half of it arrived. */
  private static final class StreamCounter extends BaseSubscriber<Payload> {
    final CompletableFuture<Void> done = new CompletableFuture<>();
    final int prefetch;
    final int half;
    final int count;
    final Deadline deadline;
    long items;
    long nbytes;
    int pending;
    boolean complete = true;

    StreamCounter(int prefetch, int count, Deadline deadline) {
      this.prefetch = prefetch;
      this.half = Math.max(1, prefetch / 2);
      this.count = count;
      this.deadline = deadline;
    }

    @Override
    protected void hookOnSubscribe(Subscription subscription) {
      request(prefetch);
    }

    @Override
    protected void hookOnNext(Payload item) {
      items++;
      nbytes += item.data().readableBytes();
      item.release();
      if ((items & 255) == 0 && deadline.passed()) {
        complete = items == count;
        cancel();
        done.complete(null);
        return;
      }
      if (++pending >= half) {
        pending = 0;
        request(half);
      }
    }

    @Override
    protected void hookOnComplete() {
      done.complete(null);
    }

    @Override
    protected void hookOnError(Throwable t) {
      done.completeExceptionally(t);
    }
  }

  static RunResult requestStream(RSocket rs, Spec spec, int count, Deadline deadline)
      throws Exception {
    StreamCounter counter = new StreamCounter(spec.prefetch, count, deadline);
    rs.requestStream(ByteBufPayload.create(count + ":" + spec.size)).subscribe(counter);
    counter.done.get();
    return new RunResult(counter.items, counter.nbytes, deadline.elapsed(), counter.complete);
  }

  // ------------------------------------------------------------------ fire-and-forget

  static RunResult fireAndForget(RSocket rs, Spec spec, int count, Deadline deadline,
      State state) {
    ByteBuf message = BenchServer.filled(spec.size);
    int sent = 0;
    try {
      while (sent < count) {
        int k = Math.min(1000, count - sent);
        // Each batch is issued from the connection's event loop, inside the answer to a "count"
        // query (one round trip per 1000 messages, which also bounds the send queue): issued
        // from this (main) thread, every frame is a hand-off to the event loop and the rate
        // fell to about 30,000 messages/s here.
        rs.requestResponse(ByteBufPayload.create("count"))
            .flatMapMany(
                reply -> {
                  reply.release();
                  return Flux.range(0, k)
                      .concatMap(
                          i -> rs.fireAndForget(ByteBufPayload.create(message.retainedSlice())));
                })
            .blockLast();
        sent += k;
        if (deadline.passed()) {
          break;
        }
      }
    } finally {
      message.release();
    }
    state.fnfExpected += sent;
    while (true) {
      Payload reply = rs.requestResponse(ByteBufPayload.create("count")).block();
      long received = Long.parseLong(reply.getDataUtf8());
      reply.release();
      if (received >= state.fnfExpected) {
        break;
      }
    }
    return new RunResult(sent, (long) sent * spec.size, deadline.elapsed(), sent == count);
  }
}
