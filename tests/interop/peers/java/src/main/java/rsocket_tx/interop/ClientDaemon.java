package rsocket_tx.interop;

import com.fasterxml.jackson.core.type.TypeReference;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The {@link Client} as a daemon, so that a test session starts ONE JVM for all its client runs
 * ({@code peers.py}, {@code Peer.client_daemon}).
 *
 * <p>Prints {@code {"ready": true, "peer": ...}} once started. Then reads one JSON array of
 * client arguments per stdin line (exactly what {@code Client} takes on its command line),
 * runs that interaction on a new connection and prints one JSON line: the client's result plus
 * {@code "exit_code"} (what {@code Client} would exit with). Exits at stdin EOF.
 */
public final class ClientDaemon {
  private ClientDaemon() {}

  public static void main(String[] argv) throws IOException {
    Common.quietLogging();
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    Common.emit(Common.object("ready", true, "peer", Common.PEER));
    String line;
    while ((line = in.readLine()) != null) {
      if (line.isBlank()) {
        continue;
      }
      Common.Outcome outcome;
      try {
        List<String> args = Common.JSON.readValue(line, new TypeReference<List<String>>() {});
        outcome = Client.run(args);
      } catch (Exception | Error e) {
        outcome = Common.Outcome.failure("client daemon: " + e);
      }
      Map<String, Object> result = new LinkedHashMap<>(outcome.result());
      result.put("exit_code", outcome.code());
      Common.emit(result);
    }
    System.exit(Common.EXIT_OK);
  }
}
