package rsocket_tx.interop;

import static rsocket_tx.interop.Common.emit;
import static rsocket_tx.interop.Common.object;

import io.rsocket.Payload;
import io.rsocket.frame.FrameHeaderCodec;
import io.rsocket.frame.FrameType;
import java.util.ArrayDeque;
import java.util.Map;
import org.reactivestreams.Publisher;
import org.reactivestreams.Subscription;
import reactor.core.CoreSubscriber;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Operators;

/**
 * The responder side of the demo echo channel: answers every inbound payload, the first one
 * (from REQUEST_CHANNEL) included, following the requester's credit; completes once the inbound
 * side has completed and every answer has gone (a separate PAYLOAD[C], needing no credit).
 *
 * <p>As a Flux it is the outbound side rsocket-java subscribes to (the requester's REQUEST_N
 * arrive as {@link #request}); as a subscriber it receives the inbound payloads. Credit to the
 * requester: {@code request(1)} takes the REQUEST_CHANNEL payload (rsocket-java sends no
 * REQUEST_N for it), then {@code request(batch)} gives REQUEST_N(batch) at once and again each
 * time {@code batch} more payloads have arrived (none when REQUEST_CHANNEL carried C).
 *
 * <p>Events: {@code request} (with {@code complete}: C on REQUEST_CHANNEL), {@code request_n},
 * {@code channel_next}, {@code channel_inbound_complete} ({@code form} from the frame that
 * completed it, see {@link FrameSpy}), {@code channel_inbound_error}, {@code cancel}.
 *
 * <p>rsocket-java calls it on the connection's event loop; the methods are synchronized all
 * the same, and {@link #drain} does not re-enter.
 */
final class EchoChannel extends Flux<Payload> implements Subscription, CoreSubscriber<Payload> {
  private final Publisher<Payload> inbound;
  private final int batch;
  private final boolean initialComplete;
  private final ArrayDeque<Payload> queue = new ArrayDeque<>();

  private CoreSubscriber<? super Payload> outbound;
  private Subscription inboundSubscription;
  private long demand;
  private boolean first = true;
  private boolean firstRequest = true;
  private boolean inboundDone;
  private boolean done;
  private boolean draining;
  private String error;
  private int sinceRequest;

  EchoChannel(Publisher<Payload> inbound, int batch) {
    this.inbound = inbound;
    this.batch = batch;
    FrameSpy.Seen seen = FrameSpy.current();
    this.initialComplete =
        seen != null && seen.type() == FrameType.REQUEST_CHANNEL && seen.has(FrameHeaderCodec.FLAGS_C);
  }

  // outbound ---------------------------------------------------------------------------------

  @Override
  public synchronized void subscribe(CoreSubscriber<? super Payload> actual) {
    if (outbound != null) {
      Operators.error(actual, new IllegalStateException("EchoChannel allows one subscriber"));
      return;
    }
    outbound = actual;
    actual.onSubscribe(this);
    inbound.subscribe(this);
  }

  @Override
  public synchronized void request(long n) {
    emit(
        object(
            "event", "request_n",
            "interaction", Server.INTERACTION_CHANNEL,
            "n", Common.requestN(n),
            "initial", firstRequest));
    firstRequest = false;
    demand = Operators.addCap(demand, n);
    drain();
  }

  @Override
  public synchronized void cancel() {
    if (!done) {
      done = true;
      emit(object("event", "cancel", "interaction", Server.INTERACTION_CHANNEL));
    }
  }

  private void drain() {
    if (draining || outbound == null || done) {
      return;
    }
    draining = true;
    try {
      if (error != null) {
        done = true;
        outbound.onError(new IllegalStateException(error));
        return;
      }
      while (demand > 0 && !queue.isEmpty() && !done) {
        demand--;
        outbound.onNext(queue.poll());
      }
      if (inboundDone && queue.isEmpty() && !done) {
        done = true;
        outbound.onComplete();
      }
    } finally {
      draining = false;
    }
  }

  // inbound ----------------------------------------------------------------------------------

  @Override
  public synchronized void onSubscribe(Subscription s) {
    inboundSubscription = s;
    s.request(1); // the REQUEST_CHANNEL payload: no REQUEST_N goes out for it
  }

  @Override
  public synchronized void onNext(Payload payload) {
    if (first) {
      first = false;
      Server.payloadEvent(
          "request", payload, "interaction", Server.INTERACTION_CHANNEL, "complete",
          initialComplete);
      error = Common.errorRequested(Common.data(payload));
      if (error == null) {
        queue.add(Server.echo(payload));
        if (!initialComplete) {
          inboundSubscription.request(batch);
        }
      }
      drain(); // with an error: ERROR[APPLICATION_ERROR], which ends both directions
      return;
    }
    FrameSpy.Seen seen = FrameSpy.current();
    boolean complete = seen != null && seen.isPayload() && seen.has(FrameHeaderCodec.FLAGS_C);
    Server.payloadEvent("channel_next", payload, "complete", complete);
    queue.add(Server.echo(payload));
    sinceRequest++;
    if (!complete && sinceRequest >= batch) {
      sinceRequest = 0;
      inboundSubscription.request(batch);
    }
    drain();
  }

  @Override
  public synchronized void onError(Throwable t) {
    if (inboundDone) {
      return;
    }
    inboundDone = true;
    if (done) {
      return; // rsocket-java ends the inbound side after our own outbound error or cancel
    }
    Map<String, Object> event = object("event", "channel_inbound_error");
    Map<String, Object> error = Common.errorOf(t);
    if (error != null) {
      event.putAll(error);
    } else {
      event.put("message", String.valueOf(t.getMessage()));
    }
    emit(event);
    done = true;
  }

  @Override
  public synchronized void onComplete() {
    if (inboundDone) {
      return;
    }
    inboundDone = true;
    String form;
    FrameSpy.Seen seen = FrameSpy.current();
    if (initialComplete) {
      form = "request";
    } else if (seen != null && seen.isPayload() && seen.has(FrameHeaderCodec.FLAGS_N)) {
      form = "flag";
    } else {
      form = "frame";
    }
    emit(object("event", "channel_inbound_complete", "form", form));
    drain();
  }
}
