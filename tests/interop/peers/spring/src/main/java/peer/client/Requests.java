package peer.client;

import java.net.URI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.ByteBufUtil;
import io.rsocket.RSocketErrorException;
import io.rsocket.metadata.MimeTypeMetadataCodec;
import io.rsocket.metadata.WellKnownMimeType;

import org.springframework.beans.factory.ObjectProvider;
import org.springframework.core.ResolvableType;
import org.springframework.core.codec.Encoder;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.messaging.rsocket.RSocketRequester;
import org.springframework.messaging.rsocket.RSocketStrategies;
import org.springframework.security.rsocket.metadata.BearerTokenAuthenticationEncoder;
import org.springframework.security.rsocket.metadata.BearerTokenMetadata;
import org.springframework.security.rsocket.metadata.SimpleAuthenticationEncoder;
import org.springframework.security.rsocket.metadata.UsernamePasswordMetadata;
import org.springframework.stereotype.Component;
import org.springframework.util.MimeType;
import org.springframework.util.MimeTypeUtils;

import org.reactivestreams.Subscription;
import reactor.core.Exceptions;
import reactor.core.publisher.BaseSubscriber;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Sinks;
import tools.jackson.databind.json.JsonMapper;

/**
 * Runs one RSocketRequester call per JSON command (README.md, "Client mode"), on a new
 * connection each time, built from Spring Boot's RSocketRequester.Builder (its
 * RSocketStrategies: Jackson JSON and CBOR, plus the Spring Security credential encoders).
 */
@Component
public class Requests {

    static final MimeType AUTHENTICATION = MimeTypeUtils
            .parseMimeType(WellKnownMimeType.MESSAGE_RSOCKET_AUTHENTICATION.getString());
    static final MimeType PER_STREAM_MIME = MimeTypeUtils
            .parseMimeType(WellKnownMimeType.MESSAGE_RSOCKET_MIMETYPE.getString());
    static final MimeType ACCEPT_MIMES = MimeTypeUtils
            .parseMimeType(WellKnownMimeType.MESSAGE_RSOCKET_ACCEPT_MIMETYPES.getString());

    private final ObjectProvider<RSocketRequester.Builder> builders;
    private final RSocketStrategies strategies;
    private final JsonMapper mapper;

    public Requests(ObjectProvider<RSocketRequester.Builder> builders, RSocketStrategies strategies,
            JsonMapper mapper) {
        this.builders = builders;
        this.strategies = strategies;
        this.mapper = mapper;
    }

    /** Run one command line; returns the answer line. */
    @SuppressWarnings("unchecked")
    public String run(String line) {
        Map<String, Object> answer = new LinkedHashMap<>();
        List<Object> values = Collections.synchronizedList(new ArrayList<>());
        Map<String, Object> command;
        try {
            command = mapper.readValue(line, Map.class);
        } catch (RuntimeException ex) {
            answer.put("ok", false);
            answer.put("failure", "bad command: " + ex.getMessage());
            return mapper.writeValueAsString(answer);
        }
        answer.put("id", command.get("id"));
        RSocketRequester requester = null;
        try {
            requester = connect(command);
            answer.put("setup", Map.of("data_mime_type", String.valueOf(requester.dataMimeType()),
                    "metadata_mime_type", String.valueOf(requester.metadataMimeType())));
            call(requester, command, answer, values);
            answer.put("ok", true);
        } catch (Throwable thrown) {
            Throwable error = Exceptions.unwrap(thrown);
            answer.put("ok", false);
            if (error instanceof Unsupported) {
                answer.put("unsupported", error.getMessage());
            } else if (error instanceof RSocketErrorException rsocketError) {
                Map<String, Object> described = new LinkedHashMap<>();
                described.put("code", rsocketError.errorCode());
                described.put("message", rsocketError.getMessage());
                described.put("class", rsocketError.getClass().getSimpleName());
                answer.put("error", described);
            } else {
                answer.put("failure", error.getClass().getName() + ": " + error.getMessage());
            }
            if (answer.containsKey("values") || isMany(command)) {
                answer.put("values", new ArrayList<>(values));
            }
        } finally {
            if (requester != null) {
                requester.dispose();
            }
        }
        return mapper.writeValueAsString(answer);
    }

    private static boolean isMany(Map<String, Object> command) {
        Object interaction = command.get("interaction");
        return "request-stream".equals(interaction) || "request-channel".equals(interaction);
    }

    private RSocketRequester connect(Map<String, Object> command) {
        RSocketRequester.Builder builder = builders.getObject();
        Object dataMime = command.get("data_mime");
        if (dataMime != null) {
            builder.dataMimeType(MimeTypeUtils.parseMimeType((String) dataMime));
        }
        Object metadataMime = command.get("metadata_mime");
        if (metadataMime != null) {
            builder.metadataMimeType(MimeTypeUtils.parseMimeType((String) metadataMime));
        }
        // Spring Security's SimpleAuthenticationEncoder and BearerTokenAuthenticationEncoder both
        // accept ANY value for the authentication MIME type (AbstractEncoder.canEncode checks the
        // MIME type only): registered together, the first one gets the other's credentials too
        // (ClassCastException).  So each connection registers the encoder of its kind only.
        Encoder<?> authEncoder = authEncoder(command);
        if (authEncoder != null) {
            builder.rsocketStrategies((strategies) -> strategies.encoder(authEncoder));
        }
        Object setupAuth = command.get("setup_auth");
        if (setupAuth != null) {
            builder.setupMetadata(credentials(setupAuth), AUTHENTICATION);
        }
        URI url = URI.create((String) command.get("url"));
        if ("tcp".equals(url.getScheme())) {
            return builder.tcp(url.getHost(), url.getPort());
        }
        return builder.websocket(url);
    }

    /** The credentials encoder the command's credentials need (one kind per connection). */
    @SuppressWarnings("unchecked")
    private static Encoder<?> authEncoder(Map<String, Object> command) {
        Set<Boolean> kinds = new HashSet<>();
        for (String key : List.of("setup_auth", "auth")) {
            Map<String, Object> auth = (Map<String, Object>) command.get(key);
            if (auth != null) {
                kinds.add(auth.containsKey("simple"));
            }
        }
        if (kinds.size() > 1) {
            throw new Unsupported("simple and bearer credentials on one connection: Spring Security's "
                    + "SimpleAuthenticationEncoder and BearerTokenAuthenticationEncoder cannot be registered together");
        }
        if (kinds.isEmpty()) {
            return null;
        }
        return kinds.contains(true) ? new SimpleAuthenticationEncoder() : new BearerTokenAuthenticationEncoder();
    }

    /** What Spring cannot do: reported as {"unsupported": reason}. */
    static final class Unsupported extends RuntimeException {
        Unsupported(String reason) {
            super(reason);
        }
    }

    @SuppressWarnings("unchecked")
    private static Object credentials(Object spec) {
        Map<String, Object> auth = (Map<String, Object>) spec;
        if (auth.containsKey("simple")) {
            List<String> pair = (List<String>) auth.get("simple");
            return new UsernamePasswordMetadata(pair.get(0), pair.get(1));
        }
        return new BearerTokenMetadata((String) auth.get("bearer"));
    }

    /** A per-stream or accept MIME entry's content, written by rsocket-java's MimeTypeMetadataCodec. */
    static byte[] mimeEntry(List<String> mimes) {
        ByteBuf buffer = MimeTypeMetadataCodec.encode(ByteBufAllocator.DEFAULT, mimes);
        try {
            return ByteBufUtil.getBytes(buffer);
        } finally {
            buffer.release();
        }
    }

    /** Encode {@code value} with the strategies' encoder for {@code mime} (raw bytes). */
    @SuppressWarnings("unchecked")
    private byte[] encode(Object value, MimeType mime) {
        ResolvableType type = ResolvableType.forInstance(value);
        Encoder<Object> encoder = (Encoder<Object>) strategies.encoder(type, mime);
        DataBuffer buffer = encoder.encodeValue(value, strategies.dataBufferFactory(), type, mime, null);
        byte[] bytes = new byte[buffer.readableByteCount()];
        buffer.read(bytes);
        DataBufferUtils.release(buffer);
        return bytes;
    }

    @SuppressWarnings("unchecked")
    private void call(RSocketRequester requester, Map<String, Object> command, Map<String, Object> answer,
            List<Object> values) {
        String interaction = (String) command.getOrDefault("interaction", "request-response");
        Duration timeout = Duration.ofMillis(((Number) command.getOrDefault("timeout_ms", 20000)).longValue());
        List<Object> vars = (List<Object>) command.getOrDefault("route_vars", List.of());
        RSocketRequester.RequestSpec spec = requester.route((String) command.get("route"), vars.toArray());
        if (command.get("auth") != null) {
            spec = spec.metadata(credentials(command.get("auth")), AUTHENTICATION);
        }
        String streamMime = (String) command.get("stream_data_mime");
        if (streamMime != null) {
            spec = spec.metadata(mimeEntry(List.of(streamMime)), PER_STREAM_MIME);
        }
        if (command.get("accept") != null) {
            spec = spec.metadata(mimeEntry((List<String>) command.get("accept")), ACCEPT_MIMES);
        }
        Class<?> type = "bytes".equals(command.get("retrieve")) ? byte[].class : Object.class;
        RSocketRequester.RetrieveSpec retrieve = spec;
        if ("request-channel".equals(interaction)) {
            List<Object> items = (List<Object>) command.getOrDefault("items", List.of());
            if (streamMime != null) {
                MimeType mime = MimeTypeUtils.parseMimeType(streamMime);
                retrieve = spec.data(Flux.fromIterable(items).map((item) -> encode(item, mime)), byte[].class);
            } else {
                retrieve = spec.data(Flux.fromIterable(items), Object.class);
            }
        } else if (command.containsKey("data")) {
            Object data = command.get("data");
            retrieve = spec.data(streamMime != null ? encode(data, MimeTypeUtils.parseMimeType(streamMime)) : data);
        }
        switch (interaction) {
            case "request-response" -> {
                Object value = retrieve.retrieveMono(type).block(timeout);
                answer.put("value", describe(value));
            }
            case "fire-and-forget" -> {
                retrieve.send().block(timeout);
                answer.put("sent", true);
            }
            case "request-stream", "request-channel" -> {
                Flux<?> flux = retrieve.retrieveFlux(type);
                if (command.get("limit_rate") != null) {
                    flux = flux.limitRate(((Number) command.get("limit_rate")).intValue());
                }
                Integer take = command.get("take") == null ? null : ((Number) command.get("take")).intValue();
                if (take != null) {
                    flux = flux.take(take);
                }
                answer.put("values", values);
                if (command.get("request_n") != null) {
                    // request exactly that many, once, and never more: a finite request(n)
                    long credit = ((Number) command.get("request_n")).longValue();
                    Sinks.Empty<Void> done = Sinks.empty();
                    flux.subscribe(new BaseSubscriber<Object>() {
                        @Override
                        protected void hookOnSubscribe(Subscription subscription) {
                            request(credit);
                        }

                        @Override
                        protected void hookOnNext(Object value) {
                            values.add(describe(value));
                        }

                        @Override
                        protected void hookOnComplete() {
                            done.tryEmitEmpty();
                        }

                        @Override
                        protected void hookOnError(Throwable error) {
                            done.tryEmitError(error);
                        }
                    });
                    done.asMono().block(timeout);
                } else {
                    flux.doOnNext((value) -> values.add(describe(value))).then().block(timeout);
                }
                answer.put("cancelled", take != null && values.size() >= take);
                answer.put("completed", take == null || values.size() < take);
            }
            default -> throw new IllegalArgumentException("unknown interaction " + interaction);
        }
    }

    private Object describe(Object value) {
        if (value instanceof byte[] bytes) {
            return Map.of("b64", Base64.getEncoder().encodeToString(bytes));
        }
        return value;
    }

}
