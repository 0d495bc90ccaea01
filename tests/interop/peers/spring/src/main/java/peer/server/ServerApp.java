package peer.server;

import java.util.HashMap;
import java.util.Map;
import java.util.Set;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.ConfigurableApplicationContext;

import peer.Lifetime;
import peer.Options;

/**
 * Server mode: the @MessageMapping application ({@link OrdersController}) behind Spring Security
 * RSocket ({@link SecurityConfig}), served over TCP by Spring Boot's own RSocket server
 * (spring.rsocket.server.*) and over WebSocket by a second server ({@link WebSocketServer}).
 *
 * <p>Standard output: one JSON event per line ({@link Events}); once both servers listen,
 * {"event": "listening", "transport": "tcp"|"ws", "port": N} for each, then
 * "LISTENING &lt;tcp port&gt;".
 */
@SpringBootApplication
public class ServerApp {

    public static void main(String[] args) {
        Options options = new Options(args, Set.of("--watch-stdin"),
                Set.of("--port", "--ws-port", "--host", "--timeout", "--security"));
        Map<String, Object> properties = new HashMap<>();
        properties.put("spring.main.banner-mode", "off");
        properties.put("spring.main.web-application-type", "none");
        properties.put("spring.rsocket.server.port", options.getInt("--port", 0));
        properties.put("spring.rsocket.server.address", options.get("--host", "127.0.0.1"));
        properties.put("peer.ws-port", options.getInt("--ws-port", 0));
        properties.put("peer.security", options.get("--security", "either"));
        SpringApplication application = new SpringApplication(ServerApp.class);
        application.setDefaultProperties(properties);
        application.setLogStartupInfo(false);
        ConfigurableApplicationContext context = application.run();
        Events events = context.getBean(Events.class);
        Lifetime.exitAfter(context, options.getInt("--timeout", 600),
                () -> events.emit("stopping", "reason", "timeout"));
        if (options.has("--watch-stdin")) {
            Lifetime.exitAtEof(context, () -> events.emit("stopping", "reason", "stdin closed"));
        }
    }
}
