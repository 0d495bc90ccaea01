package peer.server;

import org.springframework.boot.context.event.ApplicationReadyEvent;
import org.springframework.boot.rsocket.context.RSocketServerInitializedEvent;
import org.springframework.context.event.EventListener;
import org.springframework.stereotype.Component;

/** Prints the ports once the application is ready (both servers listen). */
@Component
public class Listening {

    private final Events events;
    private final WebSocketServer webSocket;
    private volatile int tcpPort = -1;

    public Listening(Events events, WebSocketServer webSocket) {
        this.events = events;
        this.webSocket = webSocket;
    }

    /** Spring Boot's own (TCP) server is up. */
    @EventListener
    public void onServer(RSocketServerInitializedEvent event) {
        tcpPort = event.getServer().address().getPort();
    }

    @EventListener
    public void onReady(ApplicationReadyEvent event) {
        events.emit("listening", "transport", "tcp", "port", tcpPort);
        events.emit("listening", "transport", "ws", "port", webSocket.port());
        Events.line("LISTENING " + tcpPort);
    }
}
