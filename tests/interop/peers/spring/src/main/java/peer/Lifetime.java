package peer;

import java.io.IOException;
import java.io.InputStream;

import org.springframework.boot.SpringApplication;
import org.springframework.context.ConfigurableApplicationContext;

/** Stop the JVM after a timeout, and (server mode) when standard input reaches EOF. */
public final class Lifetime {

    private Lifetime() {
    }

    /** Exit the JVM (closing the Spring context) after {@code seconds}. */
    public static void exitAfter(ConfigurableApplicationContext context, int seconds, Runnable before) {
        Thread timer = new Thread(() -> {
            try {
                Thread.sleep(seconds * 1000L);
            } catch (InterruptedException ex) {
                return;
            }
            stop(context, before);
        }, "lifetime");
        timer.setDaemon(true);
        timer.start();
    }

    /** Exit the JVM (closing the Spring context) when standard input reaches EOF. */
    public static void exitAtEof(ConfigurableApplicationContext context, Runnable before) {
        Thread watcher = new Thread(() -> {
            InputStream in = System.in;
            byte[] buffer = new byte[256];
            try {
                while (in.read(buffer) >= 0) {
                    // ignore what is written: only the end matters
                }
            } catch (IOException ignored) {
                // the same as EOF
            }
            stop(context, before);
        }, "stdin-watch");
        watcher.setDaemon(true);
        watcher.start();
    }

    public static synchronized void stop(ConfigurableApplicationContext context, Runnable before) {
        if (before != null) {
            before.run();
        }
        System.exit(SpringApplication.exit(context));
    }
}
