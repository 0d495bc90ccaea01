package rsockettx.interop.reliability;

import io.rsocket.Payload;
import io.rsocket.RSocket;
import io.rsocket.core.RSocketConnector;
import io.rsocket.lease.Lease;
import io.rsocket.transport.netty.client.TcpClientTransport;
import io.rsocket.util.DefaultPayload;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * rsocket-java 1.1.5 client WITH LEASES ({@code RSocketConnector.lease(spec -> ...)}, SETUP
 * flag L): ``count`` request-responses "0", "1", ... one after another.
 *
 * <pre>
 * java -cp rsocket-java-reliability.jar rsockettx.interop.reliability.LeaseClient
 *     --port P [--count K] [--wait MS] [--max-pending N] [--await-lease]
 *     [--grant-requests N [--grant-ttl MS]] [--serve MS] [--timeout S]
 * </pre>
 *
 * --wait MS: how long each request may take before it is reported {"queued": true} (left
 * waiting; default 1500).  --max-pending N: {@code LeaseSpec.maxPendingRequests(N)}, how many
 * requests wait for a lease before the next is rejected locally (default 256, the library's;
 * 0 rejects at once).  --await-lease: before the first request, wait (up to 10 s) until the
 * requester's availability is above 0, i.e. the server's first LEASE arrived (connect()
 * completes before it).  --grant-requests N: the client's lease sender grants the server N
 * requests for --grant-ttl MS (default 60000) once; without it the client grants nothing (the
 * library's default sender, {@code Flux.never()}).  The responder answers "echo:" + data and
 * records what it served.  --serve MS: stay connected that long after the last request.
 *
 * <p>Prints one JSON line: {"peer", "results": [{index, payload | error {code, message,
 * class} | queued}], "served": [data...], "awaited_lease_ms"} (exit 0), or {"failure"} (2).
 */
public final class LeaseClient {
  public static void main(String[] argv) throws InterruptedException {
    Common.Args args = new Common.Args(argv,
        Set.of("host", "port", "count", "wait", "max-pending", "grant-requests", "grant-ttl",
            "serve", "timeout"),
        Set.of("await-lease"));
    if (!args.options.containsKey("port")) {
      Common.usage("--port is required");
    }
    int count = args.integer("count", 3);
    int waitMs = args.integer("wait", 1500);
    int maxPending = args.integer("max-pending", 256);
    int grant = args.integer("grant-requests", -1);
    int grantTtl = args.integer("grant-ttl", 60_000);
    Common.selfDestruct(args.integer("timeout", 30), "lease client");
    List<String> served = Collections.synchronizedList(new ArrayList<>());

    RSocket rsocket;
    try {
      rsocket = RSocketConnector.create()
          .lease(spec -> {
            spec.maxPendingRequests(maxPending);
            if (grant >= 0) {
              spec.sender(() -> Flux.just(Lease.create(Duration.ofMillis(grantTtl), grant))
                  .concatWith(Flux.never()));
            }
          })
          .acceptor((setup, sendingSocket) -> Mono.just(new RSocket() {
            @Override
            public Mono<Payload> requestResponse(Payload payload) {
              String data = payload.getDataUtf8();
              payload.release();
              served.add(data);
              return Mono.just(DefaultPayload.create("echo:" + data));
            }
          }))
          .connect(TcpClientTransport.create(args.str("host", Common.HOST),
              args.integer("port", 0)))
          .block(Duration.ofSeconds(30));
    } catch (RuntimeException e) {
      Common.fail("cannot connect: " + e);
      return;
    }
    Map<String, Object> result = Common.map("peer", Common.PEER);
    if (args.flag("await-lease")) {
      long start = System.nanoTime();
      while (rsocket.availability() <= 0) {
        if (System.nanoTime() - start > 10_000_000_000L) {
          Common.fail("no LEASE within 10 s");
        }
        Thread.sleep(5);
      }
      result.put("awaited_lease_ms", (System.nanoTime() - start) / 1_000_000);
    }
    List<Object> results = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      Map<String, Object> outcome = Common.map("index", i);
      try {
        Payload reply = rsocket.requestResponse(DefaultPayload.create(Integer.toString(i)))
            .block(Duration.ofMillis(waitMs));
        outcome.put("payload", reply == null ? null : reply.getDataUtf8());
      } catch (IllegalStateException e) {
        if (String.valueOf(e.getMessage()).startsWith("Timeout on blocking read")) {
          outcome.put("queued", true);
        } else {
          outcome.put("error", Common.error(e));
        }
      } catch (RuntimeException e) {
        outcome.put("error", Common.error(e));
      }
      results.add(outcome);
    }
    int serve = args.integer("serve", 0);
    if (serve > 0) {
      Thread.sleep(serve);
    }
    result.put("results", results);
    synchronized (served) {
      result.put("served", new ArrayList<>(served));
    }
    Common.finish(result, Common.EXIT_OK);
  }
}
