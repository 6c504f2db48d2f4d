# Run by the MySQL image's entrypoint from /docker-entrypoint-initdb.d (top
# level, before zz_grants.sh, once, when the data directory is first
# initialised): the sidecar's schema (sql/schema/, numbered migrations) and
# the example tables (sql/examples/), in order. Sourced by the entrypoint, so
# it uses the entrypoint's docker_process_sql; run on its own, the mysql
# client with MYSQL_ROOT_PASSWORD from the environment (never on a command
# line) against MYSQL_DATABASE. Every file is idempotent: running this again
# on an existing database is how it is upgraded (docs/upgrading.md).
for sidecar_sql in /docker-entrypoint-initdb.d/schema/*.sql /docker-entrypoint-initdb.d/examples/*.sql; do
    [ -f "$sidecar_sql" ] || continue
    echo "sidecar: applying $sidecar_sql"
    if command -v docker_process_sql >/dev/null 2>&1; then
        docker_process_sql <"$sidecar_sql"
    else
        MYSQL_PWD="$MYSQL_ROOT_PASSWORD" mysql --protocol=socket -uroot "$MYSQL_DATABASE" <"$sidecar_sql"
    fi || { echo "sidecar: $sidecar_sql failed" >&2; exit 1; }
done
unset sidecar_sql
