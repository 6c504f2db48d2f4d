# Run by the MySQL image's entrypoint from /docker-entrypoint-initdb.d (top
# level, after the *.sql schema files, once, when the data directory is first
# initialised): creates the least-privilege users of sql/grants/, one per role.
# Sourced by the entrypoint (this file is not executable), so it uses the
# entrypoint's docker_process_sql; run on its own, it uses the mysql client
# with MYSQL_ROOT_PASSWORD from the environment (never on a command line),
# and SIDECAR_SQL_DIR names the folder that holds grants/ (an edited copy of
# /usr/share/sidecar/sql on a system install).
for sidecar_grants in "${SIDECAR_SQL_DIR:-/docker-entrypoint-initdb.d}"/grants/*.sql; do
    echo "sidecar: applying $sidecar_grants"
    if command -v docker_process_sql >/dev/null 2>&1; then
        docker_process_sql <"$sidecar_grants"
    else
        MYSQL_PWD="$MYSQL_ROOT_PASSWORD" mysql --protocol=socket -uroot <"$sidecar_grants"
    fi || { echo "sidecar: $sidecar_grants failed" >&2; exit 1; }
done
unset sidecar_grants
