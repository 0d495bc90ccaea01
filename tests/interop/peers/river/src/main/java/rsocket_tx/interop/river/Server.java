package rsocket_tx.interop.river;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.net.ServerSocketFactory;
import net.jini.jeri.Endpoint;
import net.jini.jeri.InboundRequest;
import net.jini.jeri.RequestDispatcher;
import net.jini.jeri.ServerEndpoint;
import net.jini.jeri.tcp.TcpEndpoint;
import net.jini.jeri.tcp.TcpServerEndpoint;

/**
 * River's {@link TcpServerEndpoint} on 127.0.0.1 with a {@link RequestDispatcher} for the
 * interop tests.
 *
 * <pre>
 * Server [--host 127.0.0.1] [--port 0] [--timeout S] [--watch-stdin]
 * </pre>
 *
 * <p>Prints {@code LISTENING <port>}, then one JSON event per line: {@code listening} (port,
 * peer, the initial rations River reads from its system properties), {@code connection}
 * (each accepted TCP connection: {@code count}, {@code remote_port}), {@code command} (a
 * command line was read, before its body) and one event per request that is not a plain echo
 * or that failed (see README.md). Exits at stdin EOF
 * ({@code --watch-stdin}) or after {@code --timeout} seconds (default 600).
 *
 * <p>A request body is echoed (read to EOF, then written back) unless it starts with the 10
 * bytes {@code "RIVERPEER "}: then the rest of its first line is a command and the bytes after
 * the newline are the body the command works on:
 * {@code digest}, {@code stream}, {@code bytes N}, {@code abort N}, {@code hold NAME},
 * {@code release NAME}, {@code stats} (README.md, "Server").
 */
public final class Server {
    static final byte[] MAGIC = "RIVERPEER ".getBytes(StandardCharsets.US_ASCII);
    /** Seconds a held request waits for its release at most. */
    static final long HOLD_LIMIT = 300;

    private static final AtomicInteger CONNECTIONS = new AtomicInteger();
    private static final AtomicInteger REQUESTS = new AtomicInteger();
    /** Requests being dispatched now, and the most at once since the last {@code stats}. */
    private static final AtomicInteger ACTIVE = new AtomicInteger();
    private static final AtomicInteger MAX_ACTIVE = new AtomicInteger();
    private static final Map<String, CountDownLatch> HOLDS = new ConcurrentHashMap<>();

    private Server() {}

    public static void main(String[] argv) throws Exception {
        Common.quietLogging();
        Map<String, String> options = Common.flags(argv);
        String host = options.getOrDefault("host", "127.0.0.1");
        int port = Integer.parseInt(options.getOrDefault("port", "0"));
        long timeout = Long.parseLong(options.getOrDefault("timeout", "600"));

        InetAddress address = InetAddress.getByName(host);
        TcpServerEndpoint serverEndpoint =
            TcpServerEndpoint.getInstance(host, port, null, new LoopbackFactory(address));
        ServerEndpoint.ListenHandle[] handle = new ServerEndpoint.ListenHandle[1];
        Endpoint endpoint = serverEndpoint.enumerateListenEndpoints(listenEndpoint -> {
            handle[0] = listenEndpoint.listen(new Dispatcher());
            return handle[0].getCookie();
        });
        int bound = ((TcpEndpoint) endpoint).getPort();
        Common.println("LISTENING " + bound);
        Common.emit(Common.object(
            "event", "listening", "port", bound, "peer", Common.PEER,
            "server_ration", Integer.getInteger(Common.SERVER_RATION, 32768),
            "client_ration", Integer.getInteger(Common.CLIENT_RATION, 32768)));

        Thread timer = new Thread(() -> {
            try {
                Thread.sleep(TimeUnit.SECONDS.toMillis(timeout));
            } catch (InterruptedException e) {
                return;
            }
            Common.emit(Common.object("event", "stopping", "reason", "timeout"));
            System.exit(0);
        }, "lifetime");
        timer.setDaemon(true);
        timer.start();
        if (options.containsKey("watch-stdin")) {
            byte[] sink = new byte[256];
            while (System.in.read(sink) >= 0) {
                // only EOF matters
            }
            Common.emit(Common.object("event", "stopping", "reason", "stdin closed"));
            handle[0].close();
            System.exit(0);
        }
        timer.join();
    }

    /** Binds River's server socket to one address (River itself would bind the wildcard). */
    static final class LoopbackFactory extends ServerSocketFactory {
        private final InetAddress address;

        LoopbackFactory(InetAddress address) {
            this.address = address;
        }

        @Override
        public ServerSocket createServerSocket() throws IOException {
            return new CountingServerSocket();
        }

        @Override
        public ServerSocket createServerSocket(int port) throws IOException {
            return createServerSocket(port, 50, address);
        }

        @Override
        public ServerSocket createServerSocket(int port, int backlog) throws IOException {
            return createServerSocket(port, backlog, address);
        }

        @Override
        public ServerSocket createServerSocket(int port, int backlog, InetAddress ignored)
                throws IOException {
            ServerSocket socket = new CountingServerSocket();
            socket.bind(new InetSocketAddress(address, port), backlog);
            return socket;
        }

        @Override
        public boolean equals(Object other) {
            return other instanceof LoopbackFactory f && f.address.equals(address);
        }

        @Override
        public int hashCode() {
            return address.hashCode();
        }
    }

    /** Reports every accepted connection (a {@code connection} event). */
    static final class CountingServerSocket extends ServerSocket {
        CountingServerSocket() throws IOException {
            super();
        }

        @Override
        public Socket accept() throws IOException {
            Socket socket = super.accept();
            int count = CONNECTIONS.incrementAndGet();
            Common.emit(Common.object("event", "connection", "count", count,
                                      "remote_port", socket.getPort()));
            return socket;
        }
    }

    /** The modes of the module comment, one River user thread per request. */
    static final class Dispatcher implements RequestDispatcher {
        @Override
        public void dispatch(InboundRequest request) {
            int id = REQUESTS.incrementAndGet();
            MAX_ACTIVE.accumulateAndGet(ACTIVE.incrementAndGet(), Math::max);
            InputStream in = request.getRequestInputStream();
            OutputStream out = request.getResponseOutputStream();
            String command = "echo";
            Common.Digest received = new Common.Digest();
            try {
                byte[] head = in.readNBytes(MAGIC.length);
                if (!Arrays.equals(head, MAGIC)) {
                    received.update(head, 0, head.length);
                    echo(head, in, out, received);
                    return;
                }
                command = readLine(in);
                Common.emit(Common.object("event", "command", "id", id, "command", command));
                run(id, command, request, in, out, received);
            } catch (IOException | RuntimeException e) {
                Common.emit(Common.object("event", "request_failed", "id", id, "command", command,
                                          "received", received.length, "error", Common.describe(e)));
            } finally {
                ACTIVE.decrementAndGet();
            }
        }

        private static void echo(byte[] head, InputStream in, OutputStream out,
                                 Common.Digest received) throws IOException {
            ByteArrayOutputStream body = new ByteArrayOutputStream();
            body.write(head);
            byte[] buffer = new byte[Common.CHUNK];
            int count;
            while ((count = in.read(buffer)) >= 0) {
                body.write(buffer, 0, count);
                received.update(buffer, 0, count);
            }
            body.writeTo(out);
            out.close();
        }

        private static void run(int id, String command, InboundRequest request, InputStream in,
                                OutputStream out, Common.Digest received) throws IOException {
            String[] words = command.split(" ");
            switch (words[0]) {
                case "digest" -> {
                    received.readAll(in);
                    out.write(Common.json(received.describe()).getBytes(StandardCharsets.UTF_8));
                    out.close();
                    report(id, command, received);
                }
                case "stream" -> {
                    byte[] buffer = new byte[Common.CHUNK];
                    int count;
                    while ((count = in.read(buffer)) >= 0) {
                        received.update(buffer, 0, count);
                        out.write(buffer, 0, count);
                        out.flush();
                    }
                    out.close();
                    report(id, command, received);
                }
                case "bytes" -> {
                    received.readAll(in);
                    Common.writePattern(out, Long.parseLong(words[1]), 0);
                    out.close();
                    report(id, command, received);
                }
                case "abort" -> {
                    received.readAll(in);
                    Common.writePattern(out, Long.parseLong(words[1]), 0);
                    out.flush();
                    request.abort();
                    Common.emit(Common.object("event", "aborted", "id", id, "command", command,
                                              "length", received.length, "sha256", received.finish()));
                }
                case "hold" -> {
                    CountDownLatch latch = HOLDS.computeIfAbsent(words[1], k -> new CountDownLatch(1));
                    Common.emit(Common.object("event", "held", "id", id, "name", words[1]));
                    boolean released;
                    try {
                        released = latch.await(HOLD_LIMIT, TimeUnit.SECONDS);
                    } catch (InterruptedException e) {
                        throw new IOException("interrupted while held", e);
                    }
                    if (!released) {
                        throw new IOException("never released: " + words[1]);
                    }
                    received.readAll(in);
                    out.write(Common.json(received.describe()).getBytes(StandardCharsets.UTF_8));
                    out.close();
                    report(id, command, received);
                }
                case "release" -> {
                    received.readAll(in);
                    HOLDS.computeIfAbsent(words[1], k -> new CountDownLatch(1)).countDown();
                    out.write(("released " + words[1]).getBytes(StandardCharsets.UTF_8));
                    out.close();
                    report(id, command, received);
                }
                case "stats" -> {
                    received.readAll(in);
                    int maxActive = MAX_ACTIVE.getAndSet(ACTIVE.get());
                    out.write(Common.json(Common.object(
                        "connections", CONNECTIONS.get(), "requests", REQUESTS.get(),
                        "max_active", maxActive))
                        .getBytes(StandardCharsets.UTF_8));
                    out.close();
                }
                default -> throw new IOException("unknown command " + command);
            }
        }

        private static void report(int id, String command, Common.Digest received) {
            Common.emit(Common.object("event", "request", "id", id, "command", command,
                                      "length", received.length, "sha256", received.finish()));
        }

        private static String readLine(InputStream in) throws IOException {
            ByteArrayOutputStream line = new ByteArrayOutputStream();
            int b;
            while ((b = in.read()) >= 0 && b != '\n') {
                if (line.size() > 200) {
                    throw new IOException("command line too long");
                }
                line.write(b);
            }
            return line.toString(StandardCharsets.UTF_8);
        }
    }
}
