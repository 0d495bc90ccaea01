package benchmark;

import java.io.IOException;
import java.io.InputStream;

/**
 * Entry point of rsocket-java's side of the benchmarks; the same line protocol as the Python
 * implementations (see benchmarks/common.py):
 *
 * <pre>
 *   java -cp rsocket-java-bench.jar benchmark.Main server          prints "PORT n" (or "UNAVAILABLE why")
 *   java -cp rsocket-java-bench.jar benchmark.Main client PORT SPEC prints "RESULT {json}"
 * </pre>
 *
 * The transport comes from the environment variable BENCH_TRANSPORT (tcp, tls, ws, wss), the TLS
 * certificate and key from BENCH_TLS_CERT / BENCH_TLS_KEY. The process exits as soon as its stdin
 * (a pipe from the orchestrator) closes, so an interrupted run leaves nothing behind.
 */
public final class Main {
  private Main() {}

  public static void main(String[] args) throws Exception {
    dieWithParent();
    if (args.length == 1 && args[0].equals("server")) {
      BenchServer.run();
    } else if (args.length == 3 && args[0].equals("client")) {
      BenchClient.run(Integer.parseInt(args[1]), Spec.parse(args[2]));
    } else {
      System.err.println("usage: server | client PORT SPEC_JSON");
      System.exit(2);
    }
  }

  /** Exit the JVM when stdin reaches end of file (the orchestrator closed its pipe or died). */
  private static void dieWithParent() {
    Thread watcher =
        new Thread(
            () -> {
              byte[] buffer = new byte[4096];
              InputStream in = System.in;
              try {
                while (in.read(buffer) >= 0) {
                  // discard
                }
              } catch (IOException ignored) {
                // the pipe is gone: exit below
              }
              Runtime.getRuntime().halt(0);
            },
            "parent-watch");
    watcher.setDaemon(true);
    watcher.start();
  }

  /** A one-line description of a failure (type and message), at most 300 characters. */
  static String describe(Throwable t) {
    String text = t.getClass().getSimpleName() + ": " + t.getMessage();
    text = text.replaceAll("\\s+", " ").trim();
    return text.length() > 300 ? text.substring(0, 300) : text;
  }
}
