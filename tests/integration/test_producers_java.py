"""examples/producers/java (JDBC, Debian's libmariadb-java) against the real
servers: see producers_common.py for what is run and checked."""
from producers_common import *

JAR = "/usr/share/java/mariadb-java-client.jar"
if not (shutil.which("javac") and shutil.which("java") and os.path.exists(JAR)):
    toolchain_missing("java", f"javac, java, {JAR}", "default-jdk-headless libmariadb-java")
out = tempfile.mkdtemp(prefix="sc-java-")
r = run_cmd(["javac", "-Xlint:all", "-Werror", "-d", out, "-cp", JAR,
             os.path.join(ROOT, "examples", "producers", "java", "OrderProducer.java")])
ok(r.returncode == 0, "java: OrderProducer.java compiles offline against Debian's Connector/J (-Werror)",
   detail=r.stdout + r.stderr)
if r.returncode != 0:
    done()
run_suite("java", ["java", "-cp", out + ":" + JAR, "OrderProducer"])
done()
