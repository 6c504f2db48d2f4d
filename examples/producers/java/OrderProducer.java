/*
 * A producer in Java (plain JDBC; here the MariaDB Connector/J of Debian's
 * libmariadb-java, which also speaks to MySQL) that follows
 * docs/producers.md: the order row and its outbox_event row in one
 * transaction, an honest outcome, and an UNKNOWN commit reconciled by
 * (tenant_id, request_id), never replayed blindly.
 *
 *   PRODUCER_MYSQL_URL=mysql://user:pass@host:port/db \
 *       java -cp .:/usr/share/java/mariadb-java-client.jar OrderProducer [--count N] [--tenant T] [--prefix P]
 *
 * One JSON line per request on stdout:
 *   {"request_id", "event_id", "order_id", "outcome", "attempts", "reconciled", "discarded"}
 * outcome: committed | already_accepted | failed. Exit 0 when every request
 * ended accepted.
 *
 * Built offline: javac -cp /usr/share/java/mariadb-java-client.jar OrderProducer.java
 */
import java.net.URI;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayDeque;
import java.util.Properties;

public final class OrderProducer {
    static final int MAX_ATTEMPTS = 8;
    static final int ER_DUP_ENTRY = 1062, ER_LOCK_WAIT_TIMEOUT = 1205, ER_LOCK_DEADLOCK = 1213;

    /* source and type of the event (docs/producers.md, "The outbox row"):
     * aggregate_type a URI-reference of at most 64 characters, event_type at
     * most 128 (it is the routing key). */
    static final String AGGREGATE_TYPE = "ORDER", EVENT_TYPE = "ORDER_ACCEPTED";

    enum Outcome { COMMITTED, ROLLED_BACK, UNKNOWN }

    private static final SecureRandom RANDOM = new SecureRandom();

    /* RFC 9562 UUIDv7 (the JDK has none): 48 bits of Unix time in ms,
     * version 7, 74 random bits with the variant 10, lowercase. */
    static String uuid7() {
        byte[] b = new byte[16];
        RANDOM.nextBytes(b);
        long ms = System.currentTimeMillis();
        for (int i = 0; i < 6; i++)
            b[i] = (byte) (ms >>> (40 - 8 * i));
        b[6] = (byte) (0x70 | (b[6] & 0x0f));
        b[8] = (byte) (0x80 | (b[8] & 0x3f));
        StringBuilder s = new StringBuilder(36);
        for (int i = 0; i < 16; i++) {
            if (i == 4 || i == 6 || i == 8 || i == 10)
                s.append('-');
            s.append(Character.forDigit((b[i] >> 4) & 0xf, 16)).append(Character.forDigit(b[i] & 0xf, 16));
        }
        return s.toString();
    }

    /* mysql://user:pass@host:port/db, user and password percent-encoded. */
    static final class Target {
        final String jdbcUrl;
        final Properties props = new Properties();

        Target(String raw) {
            URI u = URI.create(raw);
            if (!"mysql".equals(u.getScheme()))
                throw new IllegalArgumentException("PRODUCER_MYSQL_URL must be mysql://user:pass@host:port/db");
            String[] ui = u.getRawUserInfo().split(":", 2);
            props.setProperty("user", decode(ui[0]));
            props.setProperty("password", ui.length > 1 ? decode(ui[1]) : "");
            // The session in UTC; every wait bounded, so a lost reply ends in
            // an exception instead of a hang.
            props.setProperty("sessionVariables", "time_zone='+00:00'");
            props.setProperty("connectTimeout", "5000");
            props.setProperty("socketTimeout", "10000");
            jdbcUrl = "jdbc:mariadb://" + u.getHost() + ":" + (u.getPort() > 0 ? u.getPort() : 3306) + u.getPath();
        }

        static String decode(String s) {
            return URLDecoder.decode(s.replace("+", "%2B"), StandardCharsets.UTF_8);
        }
    }

    /* The smallest pool that shows the rule: a connection whose COMMIT
     * outcome is unknown is aborted (the physical connection closed), never
     * handed out again. A real pool has the same call: HikariCP's
     * evictConnection, or Connection.abort on the pooled connection. */
    static final class Pool {
        final Target target;
        final ArrayDeque<Connection> idle = new ArrayDeque<>();

        Pool(Target t) { target = t; }

        Connection get() throws SQLException {
            Connection c = idle.poll();
            if (c != null)
                return c;
            SQLException last = null;
            for (int i = 0; i < 50; i++) {
                try {
                    c = DriverManager.getConnection(target.jdbcUrl, target.props);
                    c.setAutoCommit(false);
                    return c;
                } catch (SQLException e) {
                    last = e;
                    sleep(200);
                }
            }
            throw last;
        }

        void put(Connection c) { idle.push(c); }

        void discard(Connection c) {
            try {
                c.abort(Runnable::run);
            } catch (SQLException e) {
                // already broken: nothing else to release
            }
        }
    }

    static final class Accepted {
        Outcome outcome;
        long orderId;
        int code;

        Accepted(Outcome o, long id, int code) { outcome = o; orderId = id; this.code = code; }
    }

    /* The order and its outbox row in one transaction on c. */
    static Accepted accept(Connection c, String tenant, String requestId, String eventId) {
        long orderId;
        try {
            try (PreparedStatement ps = c.prepareStatement(
                    "INSERT INTO orders (tenant_id, request_id, acceptance_event_id, version, status, created_at)"
                    + " VALUES (?, ?, ?, 1, 'ACCEPTED', UTC_TIMESTAMP(6))", Statement.RETURN_GENERATED_KEYS)) {
                ps.setString(1, tenant);
                ps.setString(2, requestId);
                ps.setString(3, eventId);
                ps.executeUpdate();
                try (ResultSet k = ps.getGeneratedKeys()) {
                    k.next();
                    orderId = k.getLong(1);
                }
            }
            // The payload is JSON text bound as a string (MariaDB has no
            // CAST(... AS JSON)); a real service uses its JSON library.
            String payload = "{\"orderId\":" + orderId + ",\"status\":\"ACCEPTED\",\"version\":1}";
            try (PreparedStatement ps = c.prepareStatement(
                    "INSERT INTO outbox_event (event_id, aggregate_type, aggregate_id, event_type, event_version,"
                    + " payload, status, created_at) VALUES (?, ?, ?, ?, 1, ?, 'PENDING', UTC_TIMESTAMP(6))")) {
                ps.setString(1, eventId);
                ps.setString(2, AGGREGATE_TYPE);
                ps.setString(3, Long.toString(orderId));
                ps.setString(4, EVENT_TYPE);
                ps.setString(5, payload);
                ps.executeUpdate();
            }
        } catch (SQLException e) {
            try {
                c.rollback();
            } catch (SQLException rb) {
                return new Accepted(Outcome.UNKNOWN, 0, e.getErrorCode());
            }
            return new Accepted(Outcome.ROLLED_BACK, 0, e.getErrorCode());
        }
        try {
            c.commit();
        } catch (SQLException e) {
            return new Accepted(Outcome.UNKNOWN, 0, 0);
        }
        return new Accepted(Outcome.COMMITTED, orderId, 0);
    }

    /* {order id, acceptance_event_id} of the request, or null: a locking read
     * on the primary sees the latest committed row and waits for a first
     * attempt that is still running. */
    static String[] reconcile(Connection c, String tenant, String requestId) throws SQLException {
        String[] row = null;
        try (PreparedStatement ps = c.prepareStatement(
                "SELECT id, acceptance_event_id FROM orders WHERE tenant_id = ? AND request_id = ? FOR UPDATE")) {
            ps.setString(1, tenant);
            ps.setString(2, requestId);
            try (ResultSet rs = ps.executeQuery()) {
                if (rs.next())
                    row = new String[] {Long.toString(rs.getLong(1)), rs.getString(2)};
            }
        }
        c.commit();
        return row;
    }

    static String json(String requestId, String eventId, Long orderId, String outcome, int attempts,
                       int reconciled, int discarded) {
        // request ids and event ids here are plain ASCII without quotes
        return "{\"request_id\":\"" + requestId + "\",\"event_id\":\"" + eventId + "\",\"order_id\":"
            + (orderId == null ? "null" : orderId.toString()) + ",\"outcome\":\"" + outcome + "\",\"attempts\":"
            + attempts + ",\"reconciled\":" + reconciled + ",\"discarded\":" + discarded + "}";
    }

    static String submit(Pool pool, String tenant, String requestId, String eventId) throws SQLException {
        int attempts = 0, reconciled = 0, discarded = 0;
        while (attempts < MAX_ATTEMPTS) {
            attempts++;
            Connection c = pool.get();
            Accepted a = accept(c, tenant, requestId, eventId);
            if (a.outcome == Outcome.COMMITTED) {
                pool.put(c);
                return json(requestId, eventId, a.orderId, "committed", attempts, reconciled, discarded);
            }
            if (a.outcome == Outcome.ROLLED_BACK) {
                pool.put(c);
                if (a.code == ER_LOCK_DEADLOCK || a.code == ER_LOCK_WAIT_TIMEOUT) {
                    sleep(50L * attempts);
                    continue;
                }
                if (a.code != ER_DUP_ENTRY) // permanent: the same input fails the same way
                    return json(requestId, eventId, null, "failed", attempts, reconciled, discarded);
                // 1062 (uq_orders_tenant_request, or a racing attempt): reconcile.
            } else {
                pool.discard(c);
                discarded++;
            }
            String[] row = null;
            boolean answered = false;
            for (int i = 1; i <= 20 && !answered; i++) {
                Connection r = pool.get();
                try {
                    row = reconcile(r, tenant, requestId);
                    answered = true;
                    pool.put(r);
                } catch (SQLException e) {
                    pool.discard(r);
                    sleep(200L * i);
                }
            }
            reconciled++;
            if (!answered)
                return json(requestId, eventId, null, "failed", attempts, reconciled, discarded);
            if (row != null)
                return json(requestId, row[1], Long.parseLong(row[0]),
                            row[1].equals(eventId) ? "committed" : "already_accepted", attempts, reconciled,
                            discarded);
            // Not committed: try again with the same event id.
        }
        return json(requestId, eventId, null, "failed", attempts, reconciled, discarded);
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    public static void main(String[] args) throws Exception {
        int count = 1;
        String tenant = "demo", prefix = "req";
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--count": count = Integer.parseInt(args[i + 1]); break;
                case "--tenant": tenant = args[i + 1]; break;
                case "--prefix": prefix = args[i + 1]; break;
                default:
                    System.err.println("usage: OrderProducer [--count N] [--tenant T] [--prefix P]");
                    System.exit(2);
            }
        }
        String url = System.getenv("PRODUCER_MYSQL_URL");
        if (url == null || url.isEmpty()) {
            System.err.println("OrderProducer: set PRODUCER_MYSQL_URL=mysql://user:pass@host:port/db");
            System.exit(2);
        }
        Pool pool = new Pool(new Target(url));
        boolean allOk = true;
        for (int i = 1; i <= count; i++) {
            String requestId = prefix + "-" + i;
            // One event id per request, made before the first attempt and
            // kept for every retry of this request.
            String line = submit(pool, tenant, requestId, uuid7());
            allOk &= !line.contains("\"outcome\":\"failed\"");
            System.out.println(line);
            System.out.flush();
        }
        System.exit(allOk ? 0 : 1);
    }
}
