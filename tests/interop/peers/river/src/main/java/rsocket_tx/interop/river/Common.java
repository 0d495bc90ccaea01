package rsocket_tx.interop.river;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * What {@link Server} and {@link ClientDaemon} share: the test body pattern, sha256 digests,
 * one-line JSON output (no JSON library: the jar holds River and nothing else) and option
 * parsing.
 */
final class Common {
    /** Name printed in the ready/listening lines. */
    static final String PEER = "apache-river-2.2.3";
    /** River's system property: the server's initial inbound ration, bytes (MuxServer). */
    static final String SERVER_RATION = "com.sun.jini.jeri.connection.mux.server.initialInboundRation";
    /** River's system property: the client's initial inbound ration, bytes (MuxClient). */
    static final String CLIENT_RATION = "com.sun.jini.jeri.connection.mux.client.initialInboundRation";
    /** Read/write chunk of the programs (River fragments Data at 1,024 bytes anyway). */
    static final int CHUNK = 8192;

    private static final PrintStream OUT =
        new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true,
                        StandardCharsets.UTF_8);

    private Common() {}

    /** Silences River's java.util.logging (it logs expected I/O failures at INFO/FINE). */
    static void quietLogging() {
        Logger.getLogger("net.jini").setLevel(Level.SEVERE);
        Logger.getLogger("com.sun.jini").setLevel(Level.SEVERE);
    }

    /** Byte {@code i} of every test body is {@code (offset + i) % 256}. */
    static byte[] pattern(int length, int offset) {
        byte[] out = new byte[length];
        for (int i = 0; i < length; i++) {
            out[i] = (byte) ((offset + i) & 0xFF);
        }
        return out;
    }

    static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    static String hex(byte[] bytes) {
        StringBuilder out = new StringBuilder(bytes.length * 2);
        for (byte b : bytes) {
            out.append(Character.forDigit((b >> 4) & 0xF, 16)).append(Character.forDigit(b & 0xF, 16));
        }
        return out.toString();
    }

    /** Length and sha256 of what a stream gives until EOF (it is read fully, not kept). */
    static final class Digest {
        long length;
        final MessageDigest sha = sha256();
        String hexDigest;

        void update(byte[] buffer, int offset, int count) {
            sha.update(buffer, offset, count);
            length += count;
        }

        String finish() {
            if (hexDigest == null) {
                hexDigest = hex(sha.digest());
            }
            return hexDigest;
        }

        Map<String, Object> describe() {
            return object("length", length, "sha256", finish());
        }

        /** Reads {@code in} to EOF into this digest; returns this. */
        Digest readAll(InputStream in) throws IOException {
            byte[] buffer = new byte[CHUNK];
            int count;
            while ((count = in.read(buffer)) >= 0) {
                update(buffer, 0, count);
            }
            return this;
        }
    }

    /** Writes {@code length} bytes of {@link #pattern} to {@code out} in chunks. */
    static void writePattern(OutputStream out, long length, int offset) throws IOException {
        byte[] block = pattern(CHUNK + 256, offset);
        long sent = 0;
        while (sent < length) {
            int count = (int) Math.min(CHUNK, length - sent);
            int start = (int) (sent % 256);
            out.write(block, start, count);
            sent += count;
        }
    }

    // ---------------------------------------------------------------------------------------
    // JSON output
    // ---------------------------------------------------------------------------------------

    /** An ordered JSON object from alternating keys and values. */
    static Map<String, Object> object(Object... keysAndValues) {
        Map<String, Object> out = new LinkedHashMap<>();
        for (int i = 0; i < keysAndValues.length; i += 2) {
            out.put((String) keysAndValues[i], keysAndValues[i + 1]);
        }
        return out;
    }

    /** Prints one JSON line on stdout (thread-safe, flushed). */
    static void emit(Map<String, Object> document) {
        String line = json(document);
        synchronized (OUT) {
            OUT.println(line);
            OUT.flush();
        }
    }

    /** Prints a plain line on stdout (thread-safe, flushed). */
    static void println(String line) {
        synchronized (OUT) {
            OUT.println(line);
            OUT.flush();
        }
    }

    static String json(Object value) {
        StringBuilder out = new StringBuilder();
        appendJson(out, value);
        return out.toString();
    }

    private static void appendJson(StringBuilder out, Object value) {
        if (value == null) {
            out.append("null");
        } else if (value instanceof Boolean || value instanceof Integer || value instanceof Long) {
            out.append(value);
        } else if (value instanceof Map<?, ?> map) {
            out.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> entry : map.entrySet()) {
                if (!first) {
                    out.append(", ");
                }
                first = false;
                appendString(out, String.valueOf(entry.getKey()));
                out.append(": ");
                appendJson(out, entry.getValue());
            }
            out.append('}');
        } else if (value instanceof List<?> list) {
            out.append('[');
            for (int i = 0; i < list.size(); i++) {
                if (i > 0) {
                    out.append(", ");
                }
                appendJson(out, list.get(i));
            }
            out.append(']');
        } else {
            appendString(out, value.toString());
        }
    }

    private static void appendString(StringBuilder out, String text) {
        out.append('"');
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        out.append('"');
    }

    /** {@code "Class: message"} of a failure, with its causes. */
    static String describe(Throwable failure) {
        StringBuilder out = new StringBuilder(failure.toString());
        Throwable cause = failure.getCause();
        for (int depth = 0; cause != null && depth < 4; depth++, cause = cause.getCause()) {
            out.append(" / caused by ").append(cause);
        }
        return out.toString();
    }

    // ---------------------------------------------------------------------------------------
    // options: --name value, or key=value words
    // ---------------------------------------------------------------------------------------

    /** {@code key=value} words (later ones win); a word without '=' is {@code key=true}. */
    static Map<String, String> words(List<String> words) {
        Map<String, String> out = new LinkedHashMap<>();
        for (String word : words) {
            int at = word.indexOf('=');
            if (at < 0) {
                out.put(word, "true");
            } else {
                out.put(word.substring(0, at), word.substring(at + 1));
            }
        }
        return out;
    }

    /** {@code --name value} options (a flag followed by another flag or nothing is "true"). */
    static Map<String, String> flags(String[] argv) {
        Map<String, String> out = new LinkedHashMap<>();
        for (int i = 0; i < argv.length; i++) {
            if (!argv[i].startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument " + argv[i]);
            }
            String name = argv[i].substring(2);
            if (i + 1 < argv.length && !argv[i + 1].startsWith("--")) {
                out.put(name, argv[++i]);
            } else {
                out.put(name, "true");
            }
        }
        return out;
    }

    static List<Integer> intList(String text) {
        List<Integer> out = new ArrayList<>();
        if (text != null && !text.isEmpty()) {
            for (String part : text.split(",")) {
                out.add(Integer.parseInt(part.trim()));
            }
        }
        return out;
    }
}
