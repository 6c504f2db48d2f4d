# Run by the MySQL image's entrypoint from /docker-entrypoint-initdb.d (top
# level, after the *.sql schema files, once, when the data directory is first
# initialised): creates the least-privilege users of sql/grants/, one per role.
# Sourced by the entrypoint (this file is not executable), so it uses the
# entrypoint's docker_process_sql; run on its own, it uses the mysql client
# with MYSQL_ROOT_PASSWORD from the environment (never on a command line),
# and SIDECAR_SQL_DIR names the folder that holds grants/ (an edited copy of
# /usr/share/sidecar/sql on a system install).
#
# Passwords: each grants file takes @sidecar_<role>_password when set, else
# makes a random one. examples/compose/with-secrets.sh (the compose
# entrypoint wrapper) writes those SET statements from the roles' URL secrets
# into $SIDECAR_INIT_DIR/role-passwords.sql; they are prepended to every
# grants file here and the file is deleted afterwards.
sidecar_init=${SIDECAR_INIT_DIR:-/run/sidecar-init}
sidecar_grants_dir=${SIDECAR_GRANTS_DIR:-${SIDECAR_SQL_DIR:-/docker-entrypoint-initdb.d}/grants}
# the SET statements (when any), then the grants file
sidecar_sql() {
    if [ -f "$sidecar_init/role-passwords.sql" ]; then cat "$sidecar_init/role-passwords.sql"; fi
    cat "$1"
}
for sidecar_grants in "$sidecar_grants_dir"/*.sql; do
    echo "sidecar: applying $sidecar_grants"
    if command -v docker_process_sql >/dev/null 2>&1; then
        sidecar_sql "$sidecar_grants" | docker_process_sql
    else
        sidecar_sql "$sidecar_grants" | MYSQL_PWD="$MYSQL_ROOT_PASSWORD" mysql --protocol=socket -uroot
    fi || { echo "sidecar: $sidecar_grants failed" >&2; exit 1; }
done
rm -f "$sidecar_init/role-passwords.sql"
unset -f sidecar_sql
unset sidecar_grants sidecar_init sidecar_grants_dir
