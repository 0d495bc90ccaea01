package peer;

import java.util.HashMap;
import java.util.Map;
import java.util.Set;

/** "--name value" and bare "--flag" command-line options. */
public final class Options {

    private final Map<String, String> values = new HashMap<>();

    /**
     * @param args the arguments after the mode
     * @param flags option names that take no value
     * @param valued option names that take a value
     */
    public Options(String[] args, Set<String> flags, Set<String> valued) {
        for (int i = 0; i < args.length; i++) {
            String name = args[i];
            if (flags.contains(name)) {
                values.put(name, "true");
            } else if (valued.contains(name) && i + 1 < args.length) {
                values.put(name, args[++i]);
            } else {
                SpringPeer.usage("unknown or incomplete option " + name);
            }
        }
    }

    public String get(String name, String fallback) {
        return values.getOrDefault(name, fallback);
    }

    public int getInt(String name, int fallback) {
        String value = values.get(name);
        if (value == null) {
            return fallback;
        }
        try {
            return Integer.parseInt(value);
        } catch (NumberFormatException ex) {
            SpringPeer.usage(name + " needs an integer, got " + value);
            return fallback;
        }
    }

    public boolean has(String name) {
        return values.containsKey(name);
    }
}
