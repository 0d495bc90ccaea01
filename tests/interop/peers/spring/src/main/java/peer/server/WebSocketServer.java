package peer.server;

import java.net.InetAddress;
import java.net.UnknownHostException;

import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.rsocket.netty.NettyRSocketServer;
import org.springframework.boot.rsocket.netty.NettyRSocketServerFactory;
import org.springframework.boot.rsocket.server.RSocketServer;
import org.springframework.boot.rsocket.server.RSocketServerCustomizer;
import org.springframework.context.SmartLifecycle;
import org.springframework.http.client.ReactorResourceFactory;
import org.springframework.messaging.rsocket.annotation.support.RSocketMessageHandler;
import org.springframework.stereotype.Component;

/**
 * A second RSocket server, WebSocket transport, with the same responder and the same
 * RSocketServerCustomizers (among them Spring Security's interceptor) as Spring Boot's TCP
 * server.  Spring Boot starts one RSocket server from spring.rsocket.server.*; a second
 * transport takes a NettyRSocketServerFactory of one's own.  The WebSocket server accepts any
 * URL path.
 */
@Component
public class WebSocketServer implements SmartLifecycle {

    private final RSocketMessageHandler handler;
    private final ObjectProvider<RSocketServerCustomizer> customizers;
    private final ReactorResourceFactory resources;
    private final int port;
    private final String host;
    private NettyRSocketServer server;

    public WebSocketServer(RSocketMessageHandler handler, ObjectProvider<RSocketServerCustomizer> customizers,
            ReactorResourceFactory resources, @Value("${peer.ws-port:0}") int port,
            @Value("${spring.rsocket.server.address:127.0.0.1}") String host) {
        this.handler = handler;
        this.customizers = customizers;
        this.resources = resources;
        this.port = port;
        this.host = host;
    }

    @Override
    public void start() {
        NettyRSocketServerFactory factory = new NettyRSocketServerFactory();
        factory.setResourceFactory(resources);
        factory.setTransport(RSocketServer.Transport.WEBSOCKET);
        try {
            factory.setAddress(InetAddress.getByName(host));
        } catch (UnknownHostException ex) {
            throw new IllegalStateException(ex);
        }
        factory.setPort(port);
        factory.setRSocketServerCustomizers(customizers.orderedStream().toList());
        server = factory.create(handler.responder());
        server.start();
    }

    @Override
    public void stop() {
        if (server != null) {
            server.stop();
        }
    }

    @Override
    public boolean isRunning() {
        return server != null && server.address() != null;
    }

    /** The port it listens on (after start). */
    public int port() {
        return server.address().getPort();
    }
}
