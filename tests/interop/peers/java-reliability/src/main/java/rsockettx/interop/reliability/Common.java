package rsockettx.interop.reliability;

import io.rsocket.RSocketErrorException;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * What the reliability programs share: option parsing, JSON lines on stdout, exit codes, the
 * self-destruct timer and the stdin watcher.
 *
 * <p>Exit codes (as the other interop peers): 0 success, 1 an RSocket error or wrong items (the
 * JSON says which), 2 usage errors, connection failures, timeouts ({"failure": ...}).
 */
final class Common {
  static final int EXIT_OK = 0;
  static final int EXIT_RSOCKET_ERROR = 1;
  static final int EXIT_FAILURE = 2;
  static final String PEER = "rsocket-java-1.1.5";
  static final String HOST = "127.0.0.1";

  private static final PrintStream OUT =
      new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true,
          StandardCharsets.UTF_8);

  private Common() {}

  /** Parsed command line: --name value pairs, bare --flags, and positional arguments. */
  static final class Args {
    final Map<String, String> options = new LinkedHashMap<>();
    final List<String> positional = new ArrayList<>();

    Args(String[] argv, Set<String> valued, Set<String> flags) {
      for (int i = 0; i < argv.length; i++) {
        String a = argv[i];
        if (a.startsWith("--")) {
          String name = a.substring(2);
          if (flags.contains(name)) {
            options.put(name, "true");
          } else if (valued.contains(name) && i + 1 < argv.length) {
            options.put(name, argv[++i]);
          } else {
            usage("unknown option or missing value: " + a);
          }
        } else {
          positional.add(a);
        }
      }
    }

    String str(String name, String dflt) {
      return options.getOrDefault(name, dflt);
    }

    int integer(String name, int dflt) {
      String v = options.get(name);
      if (v == null) {
        return dflt;
      }
      try {
        return Integer.parseInt(v);
      } catch (NumberFormatException e) {
        usage("--" + name + " wants an integer, got " + v);
        return dflt;
      }
    }

    boolean flag(String name) {
      return options.containsKey(name);
    }
  }

  /** Print {"failure": message} and exit 2. */
  static void usage(String message) {
    fail(message);
  }

  static void fail(String message) {
    emit(map("peer", PEER, "failure", message));
    System.out.flush();
    Runtime.getRuntime().halt(EXIT_FAILURE);
  }

  /** Print one JSON line and exit with ``code`` (halt: no shutdown hooks, no lingering threads). */
  static void finish(Map<String, Object> result, int code) {
    emit(result);
    OUT.flush();
    Runtime.getRuntime().halt(code);
  }

  /** Exit 2 with {"failure": "timeout ..."} after ``seconds``. */
  static void selfDestruct(int seconds, String what) {
    Thread t = new Thread(() -> {
      try {
        Thread.sleep(seconds * 1000L);
      } catch (InterruptedException e) {
        return;
      }
      fail(what + ": timed out after " + seconds + " s");
    }, "self-destruct");
    t.setDaemon(true);
    t.start();
  }

  /** Exit 0 (after a "stopping" event) when stdin reaches EOF. */
  static void watchStdin() {
    Thread t = new Thread(() -> {
      InputStream in = System.in;
      byte[] buf = new byte[256];
      try {
        while (in.read(buf) >= 0) {
          // keep reading until EOF
        }
      } catch (IOException e) {
        // EOF or broken: stop all the same
      }
      emit(map("event", "stopping", "reason", "stdin closed"));
      OUT.flush();
      Runtime.getRuntime().halt(EXIT_OK);
    }, "stdin-watch");
    t.setDaemon(true);
    t.start();
  }

  static Map<String, Object> map(Object... kv) {
    Map<String, Object> m = new LinkedHashMap<>();
    for (int i = 0; i < kv.length; i += 2) {
      m.put((String) kv[i], kv[i + 1]);
    }
    return m;
  }

  /** {"code": int | null, "message": str, "class": simple class name} of a failure. */
  static Map<String, Object> error(Throwable t) {
    Integer code = t instanceof RSocketErrorException ? ((RSocketErrorException) t).errorCode()
        : null;
    return map("code", code, "message", String.valueOf(t.getMessage()),
        "class", t.getClass().getSimpleName());
  }

  static synchronized void emit(Map<String, Object> m) {
    StringBuilder sb = new StringBuilder();
    json(sb, m);
    OUT.println(sb);
    OUT.flush();
  }

  static void println(String line) {
    OUT.println(line);
    OUT.flush();
  }

  @SuppressWarnings("unchecked")
  private static void json(StringBuilder sb, Object v) {
    if (v == null) {
      sb.append("null");
    } else if (v instanceof String) {
      quote(sb, (String) v);
    } else if (v instanceof Number || v instanceof Boolean) {
      sb.append(v);
    } else if (v instanceof Map) {
      sb.append('{');
      boolean first = true;
      for (Map.Entry<String, Object> e : ((Map<String, Object>) v).entrySet()) {
        if (!first) {
          sb.append(", ");
        }
        first = false;
        quote(sb, e.getKey());
        sb.append(": ");
        json(sb, e.getValue());
      }
      sb.append('}');
    } else if (v instanceof List) {
      sb.append('[');
      boolean first = true;
      for (Object o : (List<Object>) v) {
        if (!first) {
          sb.append(", ");
        }
        first = false;
        json(sb, o);
      }
      sb.append(']');
    } else {
      quote(sb, v.toString());
    }
  }

  private static void quote(StringBuilder sb, String s) {
    sb.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"': sb.append("\\\""); break;
        case '\\': sb.append("\\\\"); break;
        case '\n': sb.append("\\n"); break;
        case '\r': sb.append("\\r"); break;
        case '\t': sb.append("\\t"); break;
        default:
          if (c < 0x20) {
            sb.append(String.format("\\u%04x", (int) c));
          } else {
            sb.append(c);
          }
      }
    }
    sb.append('"');
  }
}
