package peer.server;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.springframework.boot.SpringBootVersion;
import org.springframework.messaging.handler.annotation.DestinationVariable;
import org.springframework.messaging.handler.annotation.MessageMapping;
import org.springframework.messaging.handler.annotation.Payload;
import org.springframework.messaging.rsocket.RSocketRequester;
import org.springframework.messaging.rsocket.annotation.ConnectMapping;
import org.springframework.security.core.Authentication;
import org.springframework.security.core.GrantedAuthority;
import org.springframework.security.core.annotation.AuthenticationPrincipal;
import org.springframework.security.core.context.ReactiveSecurityContextHolder;
import org.springframework.security.core.context.SecurityContext;
import org.springframework.stereotype.Controller;

import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The routes of the Spring peer: an order service shaped like rsocket_tx.apps.orders
 * (same documents: {"id": str, "item": str, "qty": int, "owner": str}), plus routes to
 * observe authentication and flow control.  Data is JSON or CBOR, as the SETUP says.
 *
 * <pre>
 * orders.create   request-response  {"item", "qty"} -> the new order (owner = principal)
 * orders.{id}     request-response  the order, or an error "no order 'ID'"
 * orders.feed     request-stream    every order so far (data: optional {"owner"} filter)
 * orders.bulk     request-channel   each inbound {"item", "qty"} creates an order, streamed back
 * orders.audit    fire-and-forget   event {"event": "audit", "principal", "data"}
 * orders.fail     request-response  throws IllegalStateException("failed as asked")
 * whoami          request-response  {"principal", "authorities", "authentication"}
 * admin.stats     request-response  {"orders": n, "principal"} (authority SCOPE_admin)
 * public.info     request-response  {"service", "spring_boot", "principal"} (anyone)
 * public.count    request-stream    {"count": N} -> {"n": 0} .. {"n": N-1} (anyone)
 * public.echo     request-channel   echoes every inbound value (anyone)
 * </pre>
 */
@Controller
public class OrdersController {

    /** A new order as sent: qty is boxed so that a missing one can be told from 0. */
    public record NewOrder(String item, Integer qty) {
    }

    public record Order(String id, String item, int qty, String owner) {
    }

    public record FeedQuery(String owner) {
    }

    public record Count(Integer count) {
    }

    private final Map<String, Order> orders = new LinkedHashMap<>();
    private final AtomicLong ids = new AtomicLong();
    private final Events events;

    public OrdersController(Events events) {
        this.events = events;
    }

    /** The name of who makes the current request: the authentication's name, or null. */
    private static Mono<Authentication> authentication() {
        return ReactiveSecurityContextHolder.getContext().mapNotNull(SecurityContext::getAuthentication);
    }

    private static Mono<String> principal() {
        return authentication().map(Authentication::getName).defaultIfEmpty("");
    }

    private Order store(NewOrder order, String owner) {
        if (order == null || order.item() == null || order.item().isEmpty()) {
            throw new IllegalArgumentException("order.item must be a non-empty string");
        }
        if (order.qty() == null || order.qty() < 1) {
            throw new IllegalArgumentException("order.qty must be an integer >= 1");
        }
        synchronized (orders) {
            Order created = new Order(String.valueOf(ids.incrementAndGet()), order.item(), order.qty(), owner);
            orders.put(created.id(), created);
            return created;
        }
    }

    private List<Order> snapshot() {
        synchronized (orders) {
            return new ArrayList<>(orders.values());
        }
    }

    @ConnectMapping
    public Mono<Void> setup(RSocketRequester requester) {
        return principal().doOnNext((name) -> events.emit("setup",
                "data_mime_type", String.valueOf(requester.dataMimeType()),
                "metadata_mime_type", String.valueOf(requester.metadataMimeType()),
                "principal", name)).then();
    }

    @MessageMapping("orders.create")
    public Mono<Order> create(NewOrder order) {
        return principal().map((owner) -> store(order, owner));
    }

    @MessageMapping("orders.{id}")
    public Mono<Order> get(@DestinationVariable String id) {
        Order order;
        synchronized (orders) {
            order = orders.get(id);
        }
        return order != null ? Mono.just(order) : Mono.error(new IllegalArgumentException("no order '" + id + "'"));
    }

    @MessageMapping("orders.feed")
    public Flux<Order> feed(@Payload(required = false) FeedQuery query) {
        String owner = query == null ? null : query.owner();
        return Flux.fromIterable(snapshot()).filter((o) -> owner == null || owner.equals(o.owner()));
    }

    @MessageMapping("orders.bulk")
    public Flux<Order> bulk(Flux<NewOrder> inbound) {
        return principal().flatMapMany((owner) -> inbound.map((order) -> store(order, owner)));
    }

    @MessageMapping("orders.audit")
    public Mono<Void> audit(@Payload Object data) {
        return principal().doOnNext((name) -> events.emit("audit", "principal", name, "data", data)).then();
    }

    @MessageMapping("orders.fail")
    public Mono<Order> fail() {
        throw new IllegalStateException("failed as asked");
    }

    @MessageMapping("whoami")
    public Mono<Map<String, Object>> whoami(@AuthenticationPrincipal Object principal) {
        return authentication().map((auth) -> {
            Map<String, Object> who = new LinkedHashMap<>();
            who.put("principal", auth.getName());
            who.put("authorities", auth.getAuthorities().stream().map(GrantedAuthority::getAuthority).sorted().toList());
            who.put("authentication", auth.getClass().getSimpleName());
            who.put("principal_type", principal == null ? null : principal.getClass().getSimpleName());
            return who;
        });
    }

    @MessageMapping("admin.stats")
    public Mono<Map<String, Object>> stats() {
        return principal().map((name) -> Map.of("orders", snapshot().size(), "principal", name));
    }

    @MessageMapping("public.info")
    public Mono<Map<String, Object>> info() {
        return principal().map((name) -> Map.of("service", "rsocket-spring-peer",
                "spring_boot", SpringBootVersion.getVersion(), "principal", name));
    }

    @MessageMapping("public.count")
    public Flux<Map<String, Integer>> count(Count count) {
        int n = count == null || count.count() == null ? 10 : count.count();
        AtomicInteger sent = new AtomicInteger();
        return Flux.range(0, n)
                .map((i) -> Map.of("n", i))
                .doOnNext((item) -> sent.incrementAndGet())
                .doOnRequest((requested) -> events.emit("request_n", "route", "public.count", "n", requested))
                .doOnCancel(() -> events.emit("cancel", "route", "public.count", "sent", sent.get()))
                .doOnComplete(() -> events.emit("complete", "route", "public.count", "sent", sent.get()));
    }

    @MessageMapping("public.echo")
    public Flux<Object> echo(Flux<Object> inbound) {
        return inbound;
    }
}
