/*
 * A stand-in for java.rmi.activation.ActivationID, which Java 17 removed (JEP 407) and Apache
 * River 2.2.3 still names: com.sun.jini.jeri.internal.runtime.Util's static initializer takes
 * its class literal, and TcpEndpoint reaches Util on some paths (a second getInstance for the
 * same host and port, populateContext).  Nothing here is ever instantiated by the peer.
 *
 * Compiled by ../install.sh into target/patch/ and put into the java.rmi module with
 *   --patch-module java.rmi=target/patch --add-exports java.rmi/java.rmi.activation=ALL-UNNAMED
 * (the JVM flags river_peer.py passes).
 */
package java.rmi.activation;

import java.io.Serializable;

/** Empty stand-in: only the class name matters to River's transport code. */
public class ActivationID implements Serializable {
    private static final long serialVersionUID = -4608673054848209235L;

    /** Not for use: the class exists only so that River's classes link. */
    protected ActivationID() {
    }
}
