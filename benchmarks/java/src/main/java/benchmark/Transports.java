package benchmark;

import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.rsocket.transport.ClientTransport;
import io.rsocket.transport.ServerTransport;
import io.rsocket.transport.netty.client.TcpClientTransport;
import io.rsocket.transport.netty.client.WebsocketClientTransport;
import io.rsocket.transport.netty.server.CloseableChannel;
import io.rsocket.transport.netty.server.TcpServerTransport;
import io.rsocket.transport.netty.server.WebsocketServerTransport;
import java.io.File;
import javax.net.ssl.SSLException;
import reactor.netty.http.client.HttpClient;
import reactor.netty.http.server.HttpServer;
import reactor.netty.tcp.TcpClient;
import reactor.netty.tcp.TcpServer;

/**
 * rsocket-java's Netty transports for BENCH_TRANSPORT: tcp (TcpServerTransport /
 * TcpClientTransport), tls (the same over Reactor Netty's {@code secure(...)} with a Netty
 * SslContext), ws (WebsocketServerTransport / WebsocketClientTransport, path /rsocket) and wss.
 * Servers listen on 127.0.0.1, port 0 (a free port).
 */
final class Transports {
  static final String HOST = "127.0.0.1";
  static final String WS_PATH = "/rsocket";

  private Transports() {}

  /** This process's transport: tcp, tls, ws or wss (default tcp). */
  static String kind() {
    String kind = System.getenv("BENCH_TRANSPORT");
    return kind == null || kind.isEmpty() ? "tcp" : kind;
  }

  static boolean isTls(String kind) {
    return kind.equals("tls") || kind.equals("wss");
  }

  static boolean isWs(String kind) {
    return kind.equals("ws") || kind.equals("wss");
  }

  /** The throwaway certificate and key the orchestrator wrote (PEM; key in PKCS#8). */
  private static File certificate() {
    return new File(System.getenv("BENCH_TLS_CERT"));
  }

  private static File privateKey() {
    return new File(System.getenv("BENCH_TLS_KEY"));
  }

  static SslContext serverSsl() throws SSLException {
    return SslContextBuilder.forServer(certificate(), privateKey()).build();
  }

  /** Trusts only the throwaway certificate (which names localhost and 127.0.0.1). */
  static SslContext clientSsl() throws SSLException {
    return SslContextBuilder.forClient().trustManager(certificate()).build();
  }

  static ServerTransport<CloseableChannel> server(String kind) throws SSLException {
    SslContext ssl = isTls(kind) ? serverSsl() : null;
    if (isWs(kind)) {
      // WebsocketServerTransport upgrades a request on any path, /rsocket included
      HttpServer http = HttpServer.create().host(HOST).port(0);
      if (ssl != null) {
        http = http.secure(spec -> spec.sslContext(ssl));
      }
      return WebsocketServerTransport.create(http);
    }
    TcpServer tcp = TcpServer.create().host(HOST).port(0);
    if (ssl != null) {
      tcp = tcp.secure(spec -> spec.sslContext(ssl));
    }
    return TcpServerTransport.create(tcp);
  }

  static ClientTransport client(String kind, int port) throws SSLException {
    SslContext ssl = isTls(kind) ? clientSsl() : null;
    if (isWs(kind)) {
      HttpClient http = HttpClient.create().host(HOST).port(port);
      if (ssl != null) {
        http = http.secure(spec -> spec.sslContext(ssl));
      }
      return WebsocketClientTransport.create(http, WS_PATH);
    }
    TcpClient tcp = TcpClient.create().host(HOST).port(port);
    if (ssl != null) {
      tcp = tcp.secure(spec -> spec.sslContext(ssl));
    }
    return TcpClientTransport.create(tcp);
  }
}
