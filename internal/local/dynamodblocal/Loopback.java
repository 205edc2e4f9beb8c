// Loopback starts DynamoDB Local (DynamoDBLocal.jar, on the class path)
// bound to 127.0.0.1 alone, in memory, one database for every region and
// credential, no telemetry; package dynamodblocal runs it with Java's
// source-file launcher (java Loopback.java PORT), which needs no JDK.
//
// DynamoDB Local has no flag for the address it listens on: its Jetty
// server binds every interface. This sets the host (and the port: 0 lets
// the system choose one, so no other process can take it between a probe
// and the bind) on Jetty's connector before the server starts, then prints
// one line naming the address it listens on, which the Go side waits for.
//
// It exits when its standard input ends: package dynamodblocal holds the
// other end of that pipe, which the system closes when the test binary
// exits, however it exits, so the server never outlives it (on every
// system, not only where Linux's parent-death signal exists).

import com.amazonaws.services.dynamodbv2.local.main.ServerRunner;
import com.amazonaws.services.dynamodbv2.local.server.DynamoDBProxyServer;
import java.lang.reflect.Field;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

public class Loopback {
    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: java Loopback.java PORT (0: any free port)");
            System.exit(2);
        }
        int port = Integer.parseInt(args[0]);
        // DynamoDB Local refuses -port 0; the connector's own port is set
        // below, so this one is never bound. -disableTelemetry is honoured
        // by DynamoDB Local's own main alone: package dynamodblocal also
        // sets DDB_LOCAL_TELEMETRY=0, which this path reads.
        DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(
                new String[] {"-inMemory", "-sharedDb", "-disableTelemetry", "-port", "8000"});
        Field field = DynamoDBProxyServer.class.getDeclaredField("server");
        field.setAccessible(true);
        Server jetty = (Server) field.get(proxy);
        Connector[] connectors = jetty.getConnectors();
        if (connectors.length != 1 || !(connectors[0] instanceof ServerConnector)) {
            System.err.println("DynamoDB Local's Jetty server has " + connectors.length + " connectors, not one ServerConnector: this launcher does not know this release");
            System.exit(1);
        }
        ServerConnector connector = (ServerConnector) connectors[0];
        connector.setHost("127.0.0.1");
        connector.setPort(port);
        // safeStart, not start: start swallows a failed bind (it prints a
        // line and stops the server), after which this would announce a
        // server that is not there.
        proxy.safeStart();
        System.out.println("DynamoDB Local listening on 127.0.0.1:" + connector.getLocalPort());
        while (System.in.read() != -1) {
            // Nothing is ever written: the read returns -1 once the other
            // end is closed.
        }
        // In memory: nothing to keep, so no orderly stop to wait for.
        System.exit(0);
    }
}
