#!/bin/bash
# The migrate-tenants service of docker-compose.yml (profile "tenants", in the
# mysql image for its client, after migrate): for each tenant of
# SIDECAR_TENANTS it creates the database app_<tenant> when missing, applies
# sql/schema/*.sql and the example tables of sql/examples/ to it (every file
# is idempotent, as for app), and grants the consumer and relay roles on it
# what sql/grants/ and sql/examples/grants/ grant them on app (their GRANT
# statements only, `ON app.` read as `ON app_<tenant>.`: the REVOKEs of those
# files would take the roles' grants on app). Then exits 0. As root over TCP,
# the password from the mysql_root_password secret through the environment.
set -euo pipefail
sql_dir=${SIDECAR_SQL_DIR:-/opt/sidecar/sql}
host=${MYSQL_HOST:-mysql}
tenants=${SIDECAR_TENANTS:?SIDECAR_TENANTS: the tenants, space-separated}
MYSQL_PWD=$(cat "${MYSQL_ROOT_PASSWORD_FILE:-/run/secrets/mysql_root_password}")
export MYSQL_PWD
client() { mysql --protocol=tcp -h "$host" -P "${MYSQL_PORT:-3306}" -uroot "$@"; }

# GRANT statements of FILE for DB (statements end with ';', comments dropped)
grants_for() {
    sed -e 's/--.*$//' "$1" | tr '\n' ' ' | tr ';' '\n' \
        | sed -n -E 's/^[[:space:]]*(GRANT .*)$/\1;/p' | sed -E "s/ ON app\./ ON \`$2\`./g"
}

for _ in $(seq 1 60); do
    client -e 'SELECT 1' >/dev/null 2>&1 && break
    sleep 1
done
for t in $tenants; do
    [[ "$t" =~ ^[a-z0-9_]{1,48}$ ]] || { echo "migrate-tenants: $t: not a tenant name" >&2; exit 2; }
    db=app_$t
    client -e "CREATE DATABASE IF NOT EXISTS \`$db\` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
    for f in "$sql_dir"/schema/*.sql "$sql_dir"/examples/*.sql; do
        [ -f "$f" ] || continue
        client "$db" <"$f" || { echo "migrate-tenants: $db: ${f#"$sql_dir"/} failed" >&2; exit 1; }
    done
    for f in "$sql_dir"/grants/consumer.sql "$sql_dir"/grants/relay.sql \
             "$sql_dir"/examples/grants/consumer.sql; do
        [ -f "$f" ] || continue
        grants_for "$f" "$db" | client || { echo "migrate-tenants: $db: grants of ${f#"$sql_dir"/} failed" >&2; exit 1; }
    done
    echo "migrate-tenants: tenant $t: the schema of $db is current"
done
