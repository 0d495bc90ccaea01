package peer;

import java.util.Arrays;

import peer.client.ClientApp;
import peer.server.ServerApp;

/**
 * Entry point of target/rsocket-spring-peer.jar.
 *
 * <pre>
 * java -jar rsocket-spring-peer.jar server [--port P] [--ws-port P] [--host H] [--timeout S] [--watch-stdin]
 * java -jar rsocket-spring-peer.jar client [--timeout S]
 * </pre>
 *
 * See README.md next to pom.xml for what each mode prints and accepts.
 */
public final class SpringPeer {

    private SpringPeer() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            usage("a mode is required");
        }
        String[] rest = Arrays.copyOfRange(args, 1, args.length);
        switch (args[0]) {
            case "server" -> ServerApp.main(rest);
            case "client" -> ClientApp.main(rest);
            default -> usage("unknown mode " + args[0]);
        }
    }

    /** Exit with code 2 and a {"failure": ...} line (the interop programs' usage error). */
    public static void usage(String problem) {
        System.out.println("{\"failure\": \"" + problem.replace("\"", "'")
                + "; usage: rsocket-spring-peer.jar server|client [options]\"}");
        System.out.flush();
        System.exit(2);
    }
}
