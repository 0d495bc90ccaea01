package peer.server;

import java.util.LinkedHashMap;
import java.util.Map;

import org.springframework.stereotype.Component;

import tools.jackson.databind.json.JsonMapper;

/** Prints one JSON object per line on standard output: the server's events. */
@Component
public class Events {

    private final JsonMapper mapper;

    public Events(JsonMapper mapper) {
        this.mapper = mapper;
    }

    /**
     * Print {"event": name, key: value, ...}.
     *
     * @param fields alternating keys (String) and values (anything Jackson can write)
     */
    public void emit(String name, Object... fields) {
        Map<String, Object> event = new LinkedHashMap<>();
        event.put("event", name);
        for (int i = 0; i + 1 < fields.length; i += 2) {
            event.put((String) fields[i], fields[i + 1]);
        }
        line(mapper.writeValueAsString(event));
    }

    /** Print a raw line (e.g. LISTENING). */
    public static synchronized void line(String text) {
        System.out.println(text);
        System.out.flush();
    }
}
