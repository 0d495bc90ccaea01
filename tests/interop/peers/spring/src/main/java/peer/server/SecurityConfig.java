package peer.server;

import java.nio.charset.StandardCharsets;

import javax.crypto.SecretKey;
import javax.crypto.spec.SecretKeySpec;

import org.springframework.beans.factory.annotation.Value;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.security.authentication.ReactiveAuthenticationManager;
import org.springframework.security.authentication.UserDetailsRepositoryReactiveAuthenticationManager;
import org.springframework.security.authentication.UsernamePasswordAuthenticationToken;
import org.springframework.security.config.Customizer;
import org.springframework.security.config.annotation.rsocket.RSocketSecurity;
import org.springframework.security.core.userdetails.MapReactiveUserDetailsService;
import org.springframework.security.core.userdetails.User;
import org.springframework.security.oauth2.jose.jws.MacAlgorithm;
import org.springframework.security.oauth2.jwt.NimbusReactiveJwtDecoder;
import org.springframework.security.oauth2.jwt.ReactiveJwtDecoder;
import org.springframework.security.oauth2.server.resource.authentication.BearerTokenAuthenticationToken;
import org.springframework.security.oauth2.server.resource.authentication.JwtReactiveAuthenticationManager;
import org.springframework.security.rsocket.core.PayloadSocketAcceptorInterceptor;

import reactor.core.publisher.Mono;

/**
 * Spring Security RSocket, as its reference documentation configures it.
 *
 * <ul>
 * <li>Simple authentication (message/x.rsocket.authentication.v0, type simple): users
 * alice/secret and bob/hunter2 (role USER).</li>
 * <li>Bearer authentication (the same entry, type bearer): a JWT signed with HS256 and the key
 * {@link #JWT_KEY}; principal = its "sub", authorities = SCOPE_ + each word of its "scope".</li>
 * <li>Routes public.* are permitted to all (anonymous included), admin.* need the authority
 * SCOPE_admin, every other request must be authenticated; the SETUP itself is permitted, but
 * bad credentials in it are refused (ERROR[REJECTED_SETUP]).</li>
 * </ul>
 *
 * <p>Credentials count per request (the request's metadata) and per connection (the SETUP
 * metadata; Spring Security keeps the SETUP's authentication for every request of the
 * connection that carries none of its own).
 */
@Configuration(proxyBeanMethods = false)
public class SecurityConfig {

    /** The HMAC-SHA256 key of the bearer tokens (32 bytes, UTF-8). */
    public static final String JWT_KEY = "rsocket-tx-interop-spring-hs256!";

    @Bean
    MapReactiveUserDetailsService users() {
        return new MapReactiveUserDetailsService(
                User.withUsername("alice").password("{noop}secret").roles("USER").build(),
                User.withUsername("bob").password("{noop}hunter2").roles("USER").build());
    }

    /**
     * The HS256 decoder, wrapped: Spring introspects a bean's class, and NimbusReactiveJwtDecoder's
     * methods name spring-webflux's WebClient, which this application does not have
     * (NoClassDefFoundError otherwise).
     */
    @Bean
    ReactiveJwtDecoder jwtDecoder() {
        SecretKey key = new SecretKeySpec(JWT_KEY.getBytes(StandardCharsets.UTF_8), "HmacSHA256");
        ReactiveJwtDecoder decoder = NimbusReactiveJwtDecoder.withSecretKey(key).macAlgorithm(MacAlgorithm.HS256)
                .build();
        return decoder::decode;
    }

    /**
     * Both kinds of credentials arrive in the same composite entry, and
     * RSocketSecurity.simpleAuthentication() and .jwt() both read it with
     * AuthenticationPayloadExchangeConverter, each handing whatever it finds to its own
     * manager: configured together (peer.security=docs), a bearer token reaches the
     * user-details manager first, and a simple token reaches the JWT manager, which answers
     * empty.  So (peer.security=either, the default) ONE interceptor gets a manager that passes
     * each token to the manager of its kind (README.md, "Spring Security quirks").
     */
    @Bean
    PayloadSocketAcceptorInterceptor rsocketInterceptor(RSocketSecurity rsocket, MapReactiveUserDetailsService users,
            ReactiveJwtDecoder jwtDecoder, @Value("${peer.security:either}") String style) {
        ReactiveAuthenticationManager simple = new UserDetailsRepositoryReactiveAuthenticationManager(users);
        ReactiveAuthenticationManager bearer = new JwtReactiveAuthenticationManager(jwtDecoder);
        ReactiveAuthenticationManager either = (authentication) -> {
            if (authentication instanceof BearerTokenAuthenticationToken) {
                return bearer.authenticate(authentication);
            }
            if (authentication instanceof UsernamePasswordAuthenticationToken) {
                return simple.authenticate(authentication);
            }
            return Mono.empty();
        };
        rsocket.authorizePayload((authorize) -> authorize
                        .route("public.*").permitAll()
                        .route("admin.*").hasAuthority("SCOPE_admin")
                        .anyRequest().authenticated()
                        .anyExchange().permitAll())
                .simpleAuthentication((spec) -> spec.authenticationManager(either));
        if ("docs".equals(style)) {
            rsocket.simpleAuthentication((spec) -> spec.authenticationManager(simple)).jwt(Customizer.withDefaults());
        }
        return rsocket.build();
    }
}
