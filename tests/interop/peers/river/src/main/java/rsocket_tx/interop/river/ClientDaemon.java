package rsocket_tx.interop.river;

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BrokenBarrierException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import javax.net.SocketFactory;
import net.jini.core.constraint.InvocationConstraints;
import net.jini.jeri.OutboundRequest;
import net.jini.jeri.tcp.TcpEndpoint;

/**
 * River's {@link TcpEndpoint} client as a daemon: ONE JVM per test session runs every client
 * operation (JVM startup is slow).
 *
 * <p>Prints {@code {"ready": true, ...}} once started. Then reads one command per stdin line,
 * {@code OP key=value ...}, runs each in its own thread and prints one JSON line per command:
 * {@code {"id": ID, "op": OP, ...}} (the {@code id} word of the command, so that answers can
 * arrive out of order). Exits at stdin EOF. Ops (README.md, "Client daemon"):
 *
 * <pre>
 * send       id= port= sizes=0,1,... [prefix=B64] [offset=K] [keep] [nio] [fresh]
 * concurrent id= port= count=128 size=N [prefix=B64]        (always on a fresh endpoint)
 * sequential id= port= count=1000 size=N [prefix=B64] [nio] [fresh]
 * abort      id= port= size=N [nio] [fresh]        write N bytes, no eof, then abort()
 * abort-read id= port= size=N read=M [prefix=B64] [nio] [fresh]
 *                                  send N bytes + eof, read M response bytes, then abort()
 * stats      id=
 * </pre>
 *
 * <p>Bodies are {@code prefix + pattern(size, offset)}. Every request is
 * {@code TcpEndpoint.getInstance(host, port, factory).newRequest(InvocationConstraints.EMPTY)
 * .next()}; the endpoint of a port is made once and kept, so River's connection manager reuses
 * its connections; with {@code fresh} the op gets a new endpoint (so new connections) of
 * its own. The socket factory counts the TCP connections River opens
 * ({@code connections} in the answers). With {@code nio} the endpoint has no socket factory
 * and River uses its NIO SocketChannel transport instead (no count).
 */
public final class ClientDaemon {
    /** Seconds a barrier or a single request may take at most. */
    static final long LIMIT = 300;
    private static final String HOST = "127.0.0.1";
    private static final Map<String, TcpEndpoint> ENDPOINTS = new ConcurrentHashMap<>();
    private static final Map<Integer, CountingFactory> FACTORIES = new ConcurrentHashMap<>();

    private ClientDaemon() {}

    public static void main(String[] argv) throws IOException {
        Common.quietLogging();
        Common.emit(Common.object(
            "ready", true, "peer", Common.PEER,
            "client_ration", Integer.getInteger(Common.CLIENT_RATION, 32768),
            "server_ration", Integer.getInteger(Common.SERVER_RATION, 32768)));
        BufferedReader in =
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            List<String> words = new ArrayList<>(List.of(line.trim().split("\\s+")));
            String op = words.remove(0);
            Map<String, String> options = Common.words(words);
            Thread worker = new Thread(() -> answer(op, options), "op " + line);
            worker.setDaemon(true);
            worker.start();
        }
        System.exit(0);
    }

    private static void answer(String op, Map<String, String> options) {
        Map<String, Object> out = Common.object("id", options.getOrDefault("id", ""), "op", op);
        try {
            out.putAll(run(op, options));
        } catch (Exception | Error e) {
            out.put("failure", Common.describe(e));
        }
        Common.emit(out);
    }

    private static Map<String, Object> run(String op, Map<String, String> options)
            throws Exception {
        if (op.equals("stats")) {
            Map<String, Object> counts = Common.object();
            FACTORIES.forEach((port, factory) -> counts.put(port.toString(), factory.count.get()));
            return Common.object("connections", counts);
        }
        int port = Integer.parseInt(options.get("port"));
        boolean nio = options.containsKey("nio");
        boolean fresh = options.containsKey("fresh") || op.equals("concurrent");
        CountingFactory factory = nio ? null
            : fresh ? new CountingFactory()
            : FACTORIES.computeIfAbsent(port, p -> new CountingFactory());
        TcpEndpoint endpoint = fresh ? newEndpoint(port, factory) : endpoint(port, nio);
        int before = factory == null ? 0 : factory.count.get();
        byte[] prefix = Base64.getDecoder().decode(options.getOrDefault("prefix", ""));
        int offset = Integer.parseInt(options.getOrDefault("offset", "0"));
        Map<String, Object> out = switch (op) {
            case "send" -> {
                List<Object> results = new ArrayList<>();
                for (int size : Common.intList(options.get("sizes"))) {
                    results.add(send(endpoint, prefix, size, offset, options.containsKey("keep")));
                }
                yield Common.object("results", results);
            }
            case "concurrent" -> concurrent(endpoint, prefix,
                Integer.parseInt(options.get("count")), Integer.parseInt(options.get("size")));
            case "sequential" -> sequential(endpoint, prefix,
                Integer.parseInt(options.get("count")), Integer.parseInt(options.get("size")));
            case "abort" -> abort(endpoint, Integer.parseInt(options.get("size")));
            case "abort-read" -> abortRead(endpoint, prefix, Integer.parseInt(options.get("size")),
                                           Integer.parseInt(options.get("read")));
            default -> throw new IllegalArgumentException("unknown op " + op);
        };
        if (factory != null) {
            out.put("connections", factory.count.get() - before);
            out.put("connections_total", factory.count.get());
        }
        return out;
    }

    /** The kept endpoint of {@code port} (River keeps one connection manager per endpoint). */
    static TcpEndpoint endpoint(int port, boolean nio) {
        return ENDPOINTS.computeIfAbsent(port + (nio ? "/nio" : ""),
                                         key -> newEndpoint(port, nio ? null : FACTORIES.get(port)));
    }

    /**
     * A new endpoint: with a new socket factory it is not equal to any other, so River gives it
     * a connection manager, and connections, of its own. A second getInstance for the same
     * host and port needs the ActivationID stand-in on Java 17 (README.md).
     */
    static TcpEndpoint newEndpoint(int port, CountingFactory factory) {
        return factory == null ? TcpEndpoint.getInstance(HOST, port)
                               : TcpEndpoint.getInstance(HOST, port, factory);
    }

    static OutboundRequest open(TcpEndpoint endpoint) throws IOException {
        return endpoint.newRequest(InvocationConstraints.EMPTY).next();
    }

    static void writeBody(OutputStream out, byte[] prefix, int size, int offset)
            throws IOException {
        out.write(prefix);
        Common.writePattern(out, size, offset);
    }

    /** One request: the response's length and sha256 (and base64 with {@code keep}). */
    static Map<String, Object> send(TcpEndpoint endpoint, byte[] prefix, int size, int offset,
                                    boolean keep) {
        Map<String, Object> result = Common.object("size", size);
        Common.Digest response = new Common.Digest();
        ByteArrayOutputStream kept = new ByteArrayOutputStream();
        try {
            OutboundRequest request = open(endpoint);
            try (OutputStream out = request.getRequestOutputStream()) {
                writeBody(out, prefix, size, offset);
            }
            InputStream in = request.getResponseInputStream();
            byte[] buffer = new byte[Common.CHUNK];
            int count;
            while ((count = in.read(buffer)) >= 0) {
                response.update(buffer, 0, count);
                if (keep && kept.size() < (1 << 20)) {
                    kept.write(buffer, 0, count);
                }
            }
            in.close();
            result.put("error", null);
        } catch (IOException | RuntimeException e) {
            result.put("error", Common.describe(e));
        }
        result.putAll(response.describe());
        if (keep) {
            result.put("b64", Base64.getEncoder().encodeToString(kept.toByteArray()));
        }
        return result;
    }

    /**
     * {@code count} requests at once on a new endpoint. One request first (so that River has
     * ONE established connection, which its connection manager then shares: concurrent first
     * requests would each open a connection of their own); then every thread opens its request and writes its body
     * ({@code prefix + pattern(size, i)}) and flushes it; once ALL are open (a barrier) each
     * sends eof and reads its response.
     */
    static Map<String, Object> concurrent(TcpEndpoint endpoint, byte[] prefix, int count, int size)
            throws InterruptedException {
        Map<String, Object> warmup = send(endpoint, prefix, 0, 0, false);
        if (warmup.get("error") != null) {
            return Common.object("warmup", warmup, "results", List.of());
        }
        CyclicBarrier allOpen = new CyclicBarrier(count);
        List<Map<String, Object>> results = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            int index = i;
            Map<String, Object> result = Common.object("index", index);
            results.add(result);
            Thread thread = new Thread(() -> {
                Common.Digest response = new Common.Digest();
                try {
                    OutboundRequest request = open(endpoint);
                    OutputStream out = request.getRequestOutputStream();
                    writeBody(out, prefix, size, index);
                    out.flush();
                    allOpen.await(LIMIT, TimeUnit.SECONDS);
                    out.close();
                    response.readAll(request.getResponseInputStream());
                    result.put("error", null);
                } catch (IOException | RuntimeException | InterruptedException
                         | BrokenBarrierException | TimeoutException e) {
                    result.put("error", Common.describe(e));
                }
                result.putAll(response.describe());
            }, "concurrent " + i);
            threads.add(thread);
            thread.start();
        }
        for (Thread thread : threads) {
            thread.join(TimeUnit.SECONDS.toMillis(LIMIT));
        }
        return Common.object("warmup", warmup, "results", results);
    }

    /** {@code count} requests one after the other; the first error stops the run. */
    static Map<String, Object> sequential(TcpEndpoint endpoint, byte[] prefix, int count, int size) {
        int ok = 0;
        Map<String, Object> last = null;
        for (int i = 0; i < count; i++) {
            last = send(endpoint, prefix, size, i, false);
            if (last.get("error") != null) {
                break;
            }
            ok++;
        }
        return Common.object("ok", ok, "last", last);
    }

    /** Opens a request, writes {@code size} bytes (no eof) and aborts it. */
    static Map<String, Object> abort(TcpEndpoint endpoint, int size) throws IOException {
        OutboundRequest request = open(endpoint);
        OutputStream out = request.getRequestOutputStream();
        Common.writePattern(out, size, 0);
        out.flush();
        request.abort();
        String after;
        try {
            int read = request.getResponseInputStream().read();
            after = "read " + read;
        } catch (IOException e) {
            after = Common.describe(e);
        }
        return Common.object("aborted", true, "sent", size, "response_after_abort", after);
    }

    /** Sends a full request, reads {@code read} response bytes, then aborts. */
    static Map<String, Object> abortRead(TcpEndpoint endpoint, byte[] prefix, int size, int read)
            throws IOException {
        OutboundRequest request = open(endpoint);
        try (OutputStream out = request.getRequestOutputStream()) {
            writeBody(out, prefix, size, 0);
        }
        InputStream in = request.getResponseInputStream();
        byte[] got = in.readNBytes(read);
        request.abort();
        return Common.object("aborted", true, "read", got.length);
    }

    /** Counts the sockets River makes (one per TCP connection). */
    static final class CountingFactory extends SocketFactory {
        final AtomicInteger count = new AtomicInteger();

        @Override
        public Socket createSocket() {
            count.incrementAndGet();
            return new Socket();
        }

        @Override
        public Socket createSocket(String host, int port) throws IOException {
            count.incrementAndGet();
            return new Socket(host, port);
        }

        @Override
        public Socket createSocket(String host, int port, InetAddress local, int localPort)
                throws IOException {
            count.incrementAndGet();
            return new Socket(host, port, local, localPort);
        }

        @Override
        public Socket createSocket(InetAddress host, int port) throws IOException {
            count.incrementAndGet();
            return new Socket(host, port);
        }

        @Override
        public Socket createSocket(InetAddress address, int port, InetAddress local,
                                   int localPort) throws IOException {
            count.incrementAndGet();
            return new Socket(address, port, local, localPort);
        }
    }
}
