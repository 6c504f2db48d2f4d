#!/bin/bash
# The migrate service of docker-compose.yml (run through with-secrets.sh
# migrate, in the mysql image for its client): brings the database as it is —
# a new volume or one an older version made — to the schema this version
# needs, then exits 0; consumer, relay and console start only after that
# (depends_on: service_completed_successfully). Every file is idempotent
# (docs/upgrading.md): sql/schema/*.sql in order, the example tables of
# sql/examples/, then sql/grants/ (new grants; a role that does not exist
# yet is created with its URL secret's password, an existing one keeps its
# own) and the example tables' sql/examples/grants/. As root over TCP, the password from the mysql_root_password secret
# through the environment, never a command line.
set -euo pipefail
sql_dir=${SIDECAR_SQL_DIR:-/opt/sidecar/sql}
init=${SIDECAR_INIT_DIR:-/run/sidecar-init}
host=${MYSQL_HOST:-mysql}
db=${MYSQL_DATABASE:-app}
MYSQL_PWD=$(cat "${MYSQL_ROOT_PASSWORD_FILE:-/run/secrets/mysql_root_password}")
export MYSQL_PWD
client() { mysql --protocol=tcp -h "$host" -P "${MYSQL_PORT:-3306}" -uroot "$@"; }

# the server is healthy before this starts; root over TCP may still be a moment behind
for _ in $(seq 1 60); do
    client -e 'SELECT 1' "$db" >/dev/null 2>&1 && break
    sleep 1
done
for f in "$sql_dir"/schema/*.sql "$sql_dir"/examples/*.sql; do
    [ -f "$f" ] || continue
    echo "migrate: applying ${f#"$sql_dir"/}"
    client "$db" <"$f" || { echo "migrate: ${f#"$sql_dir"/} failed" >&2; exit 1; }
done
# the roles, then the example tables' grants (after the roles exist)
for f in "$sql_dir"/grants/*.sql "$sql_dir"/examples/grants/*.sql; do
    echo "migrate: applying ${f#"$sql_dir"/}"
    { cat "$init/role-passwords.sql" 2>/dev/null || true; cat "$f"; } | client \
        || { echo "migrate: ${f#"$sql_dir"/} failed" >&2; rm -f "$init/role-passwords.sql"; exit 1; }
done
rm -f "$init/role-passwords.sql"
echo "migrate: the schema of $db is current"
