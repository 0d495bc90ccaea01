package jinibench;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import java.util.logging.Logger;
import net.jini.core.constraint.InvocationConstraints;
import net.jini.jeri.OutboundRequest;
import net.jini.jeri.tcp.TcpEndpoint;

/**
 * Apache River 2.2.3's Jini ERI mux client ({@link TcpEndpoint}, the way
 * tests/interop/peers/river's ClientDaemon uses it) for benchmarks/jini_bench.py.
 *
 * <pre>
 * JiniBench PORT KIND COUNT SIZE BUDGET_S WARMUP_S
 *   KIND: rr-1 (one request at a time), rr-100 (100 threads, one request each at a time),
 *         transfer (one request at a time; SIZE is large)
 * </pre>
 *
 * <p>Every request writes SIZE bytes, closes the request body (eof) and reads the whole
 * response (the servers echo it). First the workload runs for WARMUP_S seconds (the JIT), then
 * COUNT requests are timed; the run stops early when BUDGET_S seconds have passed. Prints one
 * line {@code RESULT {"ops": N, "seconds": S, "nbytes": B, "client_cpu": C, "warmup_ops": W}}
 * (nbytes: response bytes read; client_cpu: the JVM's CPU seconds over the measured run, its
 * JIT and GC threads included; warmup_ops: operations of the warm-up before it).
 */
public final class JiniBench {
    private static final String HOST = "127.0.0.1";

    private JiniBench() {}

    public static void main(String[] argv) throws Exception {
        Logger.getLogger("net.jini").setLevel(Level.OFF);
        Logger.getLogger("com.sun.jini").setLevel(Level.OFF);
        int port = Integer.parseInt(argv[0]);
        String kind = argv[1];
        long count = Long.parseLong(argv[2]);
        int size = Integer.parseInt(argv[3]);
        double budget = Double.parseDouble(argv[4]);
        double warmup = Double.parseDouble(argv[5]);
        TcpEndpoint endpoint = TcpEndpoint.getInstance(HOST, port);
        byte[] body = new byte[size];
        for (int i = 0; i < size; i++) {
            body[i] = (byte) i;
        }
        int threads = kind.equals("rr-100") ? 100 : 1;
        long[] warm = run(endpoint, body, threads, Long.MAX_VALUE, warmup);
        com.sun.management.OperatingSystemMXBean os =
            (com.sun.management.OperatingSystemMXBean)
                java.lang.management.ManagementFactory.getOperatingSystemMXBean();
        long cpu = os.getProcessCpuTime();
        long[] done = run(endpoint, body, threads, count, budget);
        double clientCpu = (os.getProcessCpuTime() - cpu) / 1e9;
        double seconds = done[2] / 1e9;
        System.out.println("RESULT {\"ops\": " + done[0] + ", \"seconds\": " + seconds
                           + ", \"nbytes\": " + done[1] + ", \"client_cpu\": " + clientCpu
                           + ", \"warmup_ops\": " + warm[0] + "}");
        System.out.flush();
        System.exit(0);
    }

    /** {ops, response bytes, nanoseconds}. */
    static long[] run(TcpEndpoint endpoint, byte[] body, int threads, long count, double budget)
            throws InterruptedException {
        AtomicLong issued = new AtomicLong();
        AtomicLong ops = new AtomicLong();
        AtomicLong bytes = new AtomicLong();
        AtomicBoolean failed = new AtomicBoolean();
        long start = System.nanoTime();
        long deadline = start + (long) (budget * 1e9);
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            Thread worker = new Thread(() -> {
                byte[] buffer = new byte[65536];
                while (issued.getAndIncrement() < count && System.nanoTime() < deadline) {
                    try {
                        bytes.addAndGet(once(endpoint, body, buffer));
                        ops.incrementAndGet();
                    } catch (IOException e) {
                        if (failed.compareAndSet(false, true)) {
                            e.printStackTrace();
                        }
                        return;
                    }
                }
            });
            worker.start();
            workers.add(worker);
        }
        for (Thread worker : workers) {
            worker.join();
        }
        return new long[] {ops.get(), bytes.get(), System.nanoTime() - start};
    }

    static long once(TcpEndpoint endpoint, byte[] body, byte[] buffer) throws IOException {
        OutboundRequest request = endpoint.newRequest(InvocationConstraints.EMPTY).next();
        try (OutputStream out = request.getRequestOutputStream()) {
            out.write(body);
        }
        long total = 0;
        try (InputStream in = request.getResponseInputStream()) {
            int n;
            while ((n = in.read(buffer)) >= 0) {
                total += n;
            }
        }
        if (total != body.length) {
            throw new IOException("echo of " + body.length + " bytes returned " + total);
        }
        return total;
    }
}
