package benchmark;

import java.util.HashMap;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * One workload as handed to a client (the JSON of benchmarks.common.Spec: a flat object of
 * strings and numbers).
 */
final class Spec {
  private static final Pattern FIELD =
      Pattern.compile("\"(\\w+)\"\\s*:\\s*(?:\"([^\"]*)\"|([-+0-9.eE]+|true|false|null))");

  String name;
  /** "rr", "stream" or "fnf". */
  String kind;
  /** Upper bound of operations (requests, items, messages) per measured run. */
  int count;
  /** Payload bytes per operation. */
  int size;
  /** rr: outstanding requests. */
  int inflight = 1;
  /** stream: the request-n window. */
  int prefetch = 256;
  /** Seconds: a measured run stops issuing work after this and reports what completed. */
  double budget = 5.0;
  /** Operations of one warm-up run (not reported). */
  int warmup;
  /** Measured runs on the same connection. */
  int repeat = 1;

  static Spec parse(String json) {
    Map<String, String> fields = new HashMap<>();
    Matcher m = FIELD.matcher(json);
    while (m.find()) {
      fields.put(m.group(1), m.group(2) != null ? m.group(2) : m.group(3));
    }
    Spec spec = new Spec();
    spec.name = fields.getOrDefault("name", "?");
    spec.kind = fields.get("kind");
    spec.count = Integer.parseInt(fields.get("count"));
    spec.size = Integer.parseInt(fields.get("size"));
    spec.inflight = Integer.parseInt(fields.getOrDefault("inflight", "1"));
    spec.prefetch = Integer.parseInt(fields.getOrDefault("prefetch", "256"));
    spec.budget = Double.parseDouble(fields.getOrDefault("budget", "5.0"));
    spec.warmup = Integer.parseInt(fields.getOrDefault("warmup", "0"));
    spec.repeat = Integer.parseInt(fields.getOrDefault("repeat", "1"));
    return spec;
  }

  /** The same workload with another count (the warm-up runs). */
  Spec withCount(int newCount) {
    Spec copy = new Spec();
    copy.name = name;
    copy.kind = kind;
    copy.count = newCount;
    copy.size = size;
    copy.inflight = inflight;
    copy.prefetch = prefetch;
    copy.budget = budget;
    copy.warmup = warmup;
    copy.repeat = repeat;
    return copy;
  }
}
