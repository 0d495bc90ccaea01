package peer.client;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.ConfigurableApplicationContext;

import peer.Lifetime;
import peer.Options;

/**
 * Client mode: a non-web Spring Boot application whose {@link Requests} run RSocketRequester
 * calls, one per JSON command line read from standard input, each answered by one JSON line on
 * standard output (see README.md, "Client mode").  It prints "READY" once the context is up
 * and exits at EOF of standard input (or after --timeout seconds).
 */
@SpringBootApplication(excludeName = {
        "org.springframework.boot.security.autoconfigure.rsocket.RSocketSecurityAutoConfiguration",
        "org.springframework.boot.security.autoconfigure.ReactiveUserDetailsServiceAutoConfiguration",
        "org.springframework.boot.security.autoconfigure.UserDetailsServiceAutoConfiguration",
        "org.springframework.boot.security.autoconfigure.SecurityAutoConfiguration"})
public class ClientApp {

    public static void main(String[] args) throws Exception {
        Options options = new Options(args, Set.of(), Set.of("--timeout"));
        Map<String, Object> properties = new HashMap<>();
        properties.put("spring.main.banner-mode", "off");
        properties.put("spring.main.web-application-type", "none");
        SpringApplication application = new SpringApplication(ClientApp.class);
        application.setDefaultProperties(properties);
        application.setLogStartupInfo(false);
        ConfigurableApplicationContext context = application.run();
        Lifetime.exitAfter(context, options.getInt("--timeout", 600), null);
        Requests requests = context.getBean(Requests.class);
        System.out.println("READY");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            String answer = requests.run(line);
            synchronized (System.out) {
                System.out.println(answer);
                System.out.flush();
            }
        }
        Lifetime.stop(context, null);
    }
}
