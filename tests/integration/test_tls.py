"""TLS to both servers, for real: a throwaway CA (made by tests/servers), a
RabbitMQ TLS listener that requires a client certificate, a MariaDB user
that REQUIREs X509. The right CA works end to end; a wrong CA is refused by
both; the password never shows."""
import copy

from harness import *

T = os.environ["SC_TEST_TLS_DIR"]
SECRET = "tls-only-secret"
tls_amqp = {"url": os.environ["SC_TEST_AMQPS_URL"], "tls_ca": f"{T}/ca.pem",
            "tls_cert": f"{T}/client.pem", "tls_key": f"{T}/client.key", "heartbeat_s": 5}
tls_mysql = {"url": os.environ["SC_TEST_MYSQL_TLS_URL"], "tls_ca": f"{T}/ca.pem",
             "tls_cert": f"{T}/client.pem", "tls_key": f"{T}/client.key"}

sc = Sidecar()
sc.config["amqp"] = tls_amqp
sc.config["mysql"] = tls_mysql
json.dump(sc.config, open(sc.config_path, "w"))
ok(sc.start(), "consumer started over amqps:// and MySQL TLS")
events = new_events(20)
conn = amqp()
ch = conn.channel()
ch.exchange_declare(sc.exchange, "topic", durable=True)
conn.close()
publish_events(sc.exchange, events)
ids = [e for e, _ in events]
wait_until(lambda: count_in("notification_job", "event_id", ids) == 20, timeout=30)
is_eq(count_in("notification_job", "event_id", ids), 20, "events applied over TLS")
conns = rabbitmqctl("list_connections", "ssl", "client_properties").stdout
ok(any(line.startswith("true") and sc.name in line for line in conns.splitlines()),
   "the broker reports the sidecar's connections as TLS")
is_eq(sc.stop(), 0, "clean stop")
ok(SECRET not in sc.text(), "the database password is not in the logs")

base = {"amqp": tls_amqp, "mysql": tls_mysql}
rc, out = run_sidecar_cmd(["check"], base)
is_eq(rc, 0, f"check over TLS with the right CA ({out.strip()[:120]})")

wrong = copy.deepcopy(base)
wrong["amqp"]["tls_ca"] = f"{T}/wrong-ca.pem"
rc, out = run_sidecar_cmd(["check"], wrong)
ok(rc == 1 and "amqp connect" in out and "verification failed" in out, f"broker: a wrong CA is refused ({out.strip()[-160:]})")
wrong = copy.deepcopy(base)
wrong["mysql"]["tls_ca"] = f"{T}/wrong-ca.pem"
rc, out = run_sidecar_cmd(["check"], wrong)
ok(rc == 1 and "mysql: error 2026" in out, f"database: a wrong CA is refused ({out.strip()[:160]})")
ok(SECRET not in out, "the password is not in the error")

plain = copy.deepcopy(base)
plain["mysql"] = {"url": os.environ["SC_TEST_MYSQL_TLS_URL"]}
rc, out = run_sidecar_cmd(["check"], plain)
ok(rc == 1 and "1045" in out, "without TLS the X509-only user is refused (so the TLS test proved TLS)")

nocert = copy.deepcopy(base)
del nocert["amqp"]["tls_cert"], nocert["amqp"]["tls_key"]
rc, out = run_sidecar_cmd(["check"], nocert)
is_eq(rc, 1, "the broker refuses a TLS client without a certificate (fail_if_no_peer_cert)")

bad = copy.deepcopy(base)
del bad["amqp"]["tls_ca"]
rc, out = run_sidecar_cmd(["check"], bad)
ok(rc == 2 and "amqp.tls_ca: required for amqps://" in out, "amqps:// without tls_ca is a config error")
bad = copy.deepcopy(base)
del bad["mysql"]["tls_key"]
rc, out = run_sidecar_cmd(["check"], bad)
ok(rc == 2 and "mysql.tls_key" in out, "a certificate without its key is a config error")
done()
