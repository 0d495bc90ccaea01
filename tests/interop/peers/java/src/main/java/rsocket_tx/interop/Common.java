package rsocket_tx.interop;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.rsocket.Payload;
import io.rsocket.RSocketErrorException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What the programs share: exit codes, JSON output, the payload formats and the demo responder
 * rules of the contract ({@code tests/interop/peers/README.md}; same as {@code ../common.js}
 * and {@code ../py/peer_common.py}).
 */
final class Common {
  /** The name of this peer in {@code peers.PEERS} (client results carry it as "peer"). */
  static final String PEER = "rsocket-java-1.1.5";

  static final String HOST = "127.0.0.1";
  static final int MAX_REQUEST_N = Integer.MAX_VALUE;
  static final String OCTET_STREAM = "application/octet-stream";

  static final int EXIT_OK = 0;
  static final int EXIT_RSOCKET_ERROR = 1;
  static final int EXIT_FAILURE = 2;
  static final int EXIT_UNSUPPORTED = 3;

  static final ObjectMapper JSON = new ObjectMapper();

  /** What the programs print at the end: the exit code and the JSON object. */
  record Outcome(int code, Map<String, Object> result) {
    static Outcome failure(String message) {
      return new Outcome(EXIT_FAILURE, object("failure", message));
    }

    static Outcome unsupported(String reason) {
      return new Outcome(EXIT_UNSUPPORTED, object("unsupported", reason));
    }
  }

  /** A command line the program cannot use (exit code 2, {@code "usage: ..."}). */
  static final class UsageError extends Exception {
    private static final long serialVersionUID = 1L;

    UsageError(String message) {
      super(message);
    }
  }

  private Common() {}

  /**
   * Send rsocket-java's and Netty's logging (slf4j-simple) to stderr at level warn: stdout
   * carries only the contract's lines. Call first thing in main.
   */
  static void quietLogging() {
    System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
    System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
  }

  /** An ordered JSON object from key, value, key, value... */
  static Map<String, Object> object(Object... keysAndValues) {
    Map<String, Object> out = new LinkedHashMap<>();
    for (int i = 0; i + 1 < keysAndValues.length; i += 2) {
      out.put((String) keysAndValues[i], keysAndValues[i + 1]);
    }
    return out;
  }

  static String json(Object value) {
    try {
      return JSON.writeValueAsString(value);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Write one JSON line to stdout and flush it (server events, client results). */
  static void emit(Map<String, Object> obj) {
    String line = json(obj);
    PrintStream out = System.out;
    synchronized (out) {
      out.println(line);
      out.flush();
    }
  }

  /** Print the outcome as the last stdout line and exit with its code. */
  static void finish(Outcome outcome) {
    emit(outcome.result());
    System.exit(outcome.code());
  }

  /** The bytes of --data-size/--metadata-size N: byte i is i % 256. */
  static byte[] pattern(int n) {
    byte[] out = new byte[n];
    for (int i = 0; i < n; i++) {
      out[i] = (byte) i;
    }
    return out;
  }

  static byte[] bytes(ByteBuf buf) {
    return ByteBufUtil.getBytes(buf);
  }

  static byte[] utf8(String text) {
    return text.getBytes(StandardCharsets.UTF_8);
  }

  /** The data of a payload (never null). */
  static byte[] data(Payload payload) {
    return bytes(payload.sliceData());
  }

  /** The metadata of a payload, null when the frame had no M flag. */
  static byte[] metadata(Payload payload) {
    return payload.hasMetadata() ? bytes(payload.sliceMetadata()) : null;
  }

  static String sha256(byte[] bytes) {
    try {
      return ByteBufUtil.hexDump(MessageDigest.getInstance("SHA-256").digest(bytes));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /**
   * JSON form of a payload; mode "full" ({data, metadata} base64, metadata null when absent),
   * "digest" ({data_len, data_sha256, metadata_len, metadata_sha256}) or "both".
   */
  static Map<String, Object> describe(byte[] data, byte[] metadata, String mode) {
    Map<String, Object> out = new LinkedHashMap<>();
    Base64.Encoder b64 = Base64.getEncoder();
    if (!mode.equals("digest")) {
      out.put("data", b64.encodeToString(data));
      out.put("metadata", metadata == null ? null : b64.encodeToString(metadata));
    }
    if (!mode.equals("full")) {
      out.put("data_len", data.length);
      out.put("data_sha256", sha256(data));
      out.put("metadata_len", metadata == null ? null : metadata.length);
      out.put("metadata_sha256", metadata == null ? null : sha256(metadata));
    }
    return out;
  }

  static Map<String, Object> describe(Payload payload, String mode) {
    return describe(data(payload), metadata(payload), mode);
  }

  /** {"code", "message"} of an RSocket ERROR, null for any other exception. */
  static Map<String, Object> errorOf(Throwable t) {
    if (t instanceof RSocketErrorException e) {
      return object("code", e.errorCode(), "message", e.getMessage() == null ? "" : e.getMessage());
    }
    return null;
  }

  /** The request-n of an event: rsocket-java hands 2^31-1 (unbounded) on as Long.MAX_VALUE. */
  static long requestN(long n) {
    return Math.min(n, MAX_REQUEST_N);
  }

  /** The application error message if data starts with "error:", else null. */
  static String errorRequested(byte[] data) {
    return afterPrefix(data, "error:");
  }

  /** The SETUP rejection message if the SETUP data starts with "reject:", else null. */
  static String rejectRequested(byte[] data) {
    return afterPrefix(data, "reject:");
  }

  private static String afterPrefix(byte[] data, String prefix) {
    byte[] p = prefix.getBytes(StandardCharsets.US_ASCII);
    if (data.length < p.length) {
      return null;
    }
    for (int i = 0; i < p.length; i++) {
      if (data[i] != p[i]) {
        return null;
      }
    }
    return new String(data, p.length, data.length - p.length, StandardCharsets.UTF_8);
  }

  /** Request-stream count: decimal data, 10 when empty. */
  static int streamCount(byte[] data) {
    String text = new String(data, StandardCharsets.ISO_8859_1);
    if (text.isEmpty()) {
      return 10;
    }
    if (!text.matches("[0-9]{1,9}")) {
      throw new IllegalArgumentException(
          "request-stream data must be a decimal count, got '" + text + "'");
    }
    return Integer.parseInt(text);
  }

  // -------------------------------------------------------------------------------------------
  // command line
  // -------------------------------------------------------------------------------------------

  /** Option kinds of {@link Args#parse}. */
  enum Kind {
    STRING,
    INT,
    BOOL
  }

  /** {@code --name value}, {@code --name=value} and {@code --flag} options plus positionals. */
  static final class Args {
    final Map<String, String> options = new HashMap<>();
    final List<String> positional = new ArrayList<>();

    static Args parse(List<String> argv, Map<String, Kind> spec) throws UsageError {
      Args args = new Args();
      for (int i = 0; i < argv.size(); i++) {
        String arg = argv.get(i);
        if (!arg.startsWith("--")) {
          args.positional.add(arg);
          continue;
        }
        String name = arg.substring(2);
        String value = null;
        int eq = name.indexOf('=');
        if (eq >= 0) {
          value = name.substring(eq + 1);
          name = name.substring(0, eq);
        }
        Kind kind = spec.get(name);
        if (kind == null) {
          throw new UsageError("unknown option --" + name);
        }
        if (kind == Kind.BOOL) {
          args.options.put(name, "true");
          continue;
        }
        if (value == null) {
          if (i + 1 >= argv.size()) {
            throw new UsageError("option --" + name + " needs a value");
          }
          value = argv.get(++i);
        }
        if (kind == Kind.INT && !value.matches("-?[0-9]+")) {
          throw new UsageError("option --" + name + " needs an integer, got '" + value + "'");
        }
        args.options.put(name, value);
      }
      return args;
    }

    String str(String name, String otherwise) {
      return options.getOrDefault(name, otherwise);
    }

    Integer integer(String name) {
      String value = options.get(name);
      return value == null ? null : Integer.valueOf(value);
    }

    int integer(String name, int otherwise) {
      Integer value = integer(name);
      return value == null ? otherwise : value;
    }

    boolean flag(String name) {
      return options.containsKey(name);
    }

    boolean has(String name) {
      return options.containsKey(name);
    }
  }

  /** The transport options every program takes: --transport tcp|ws, --path /P. */
  static void transportOptions(Map<String, Kind> spec) {
    spec.put("transport", Kind.STRING);
    spec.put("path", Kind.STRING);
    spec.put("host", Kind.STRING);
    spec.put("port", Kind.INT);
  }

  /** --path as a URL path (leading "/"). */
  static String path(Args args) {
    String path = args.str("path", "/");
    return path.startsWith("/") ? path : "/" + path;
  }

  /** --transport, checked: "tcp" or "ws". */
  static String transport(Args args) throws UsageError {
    String transport = args.str("transport", "tcp");
    if (!transport.equals("tcp") && !transport.equals("ws")) {
      throw new UsageError("--transport must be tcp or ws, got '" + transport + "'");
    }
    return transport;
  }
}
