# Run by the MySQL image's entrypoint from /docker-entrypoint-initdb.d (top
# level, after the *.sql schema files, once, when the data directory is first
# initialised): creates the least-privilege users of sql/grants/, one per role.
# Sourced by the entrypoint (this file is not executable), so it uses the
# entrypoint's docker_process_sql; run on its own, it uses the mysql client
# with MYSQL_ROOT_PASSWORD from the environment (never on a command line),
# and SIDECAR_SQL_DIR names the folder that holds grants/ (/usr/share/sidecar/sql
# on a system install, docs/deploy.md).
#
# Passwords: each grants file takes @sidecar_<role>_password when set, else
# makes a random one. examples/compose/with-secrets.sh (the compose
# entrypoint wrapper) writes those SET statements from the roles' URL secrets
# into $SIDECAR_INIT_DIR/role-passwords.sql; they are prepended to every
# grants file here and the file is deleted afterwards.
sidecar_init=${SIDECAR_INIT_DIR:-/run/sidecar-init}
sidecar_sql_dir=${SIDECAR_SQL_DIR:-/docker-entrypoint-initdb.d}
sidecar_grants_dir=${SIDECAR_GRANTS_DIR:-$sidecar_sql_dir/grants}
# one grants file: the SET statements (when any), then the file
sidecar_apply() {
    echo "sidecar: applying $1"
    if command -v docker_process_sql >/dev/null 2>&1; then
        { if [ -f "$sidecar_init/role-passwords.sql" ]; then cat "$sidecar_init/role-passwords.sql"; fi
          cat "$1"; } | docker_process_sql
    else
        { if [ -f "$sidecar_init/role-passwords.sql" ]; then cat "$sidecar_init/role-passwords.sql"; fi
          cat "$1"; } | MYSQL_PWD="$MYSQL_ROOT_PASSWORD" mysql --protocol=socket -uroot
    fi || { echo "sidecar: $1 failed" >&2; exit 1; }
}
# The roles (grants/: the sidecar's own tables only, sql/schema/).
for sidecar_grants in "$sidecar_grants_dir"/*.sql; do
    sidecar_apply "$sidecar_grants"
done
# The example tables' grants (examples/grants/) only with SIDECAR_EXAMPLES=1:
# compose sets it, its init applies the example tables; a database without
# them (the system install's recipe) has no such tables to grant on.
if [ "${SIDECAR_EXAMPLES:-0}" = 1 ]; then
    for sidecar_grants in "$sidecar_sql_dir"/examples/grants/*.sql; do
        sidecar_apply "$sidecar_grants"
    done
fi
rm -f "$sidecar_init/role-passwords.sql"
unset -f sidecar_apply
unset sidecar_grants sidecar_init sidecar_grants_dir sidecar_sql_dir
