#!/bin/bash
# Entrypoint wrapper for the mysql and rabbitmq services of docker-compose.yml:
# the servers take their users' passwords from the same URL secrets the
# sidecars connect with (one copy of each password, never in the compose file
# or in a container's configured environment), then it runs the image's own
# entrypoint.
#
#   with-secrets.sh mysql    docker-entrypoint.sh mysqld
#   with-secrets.sh rabbitmq docker-entrypoint.sh rabbitmq-server
#   with-secrets.sh migrate  bash migrate.sh
#
# mysql: on the first start only (empty data directory), as root, it writes
#   SET @sidecar_<role>_password = '...' for each <role>_mysql_url secret
#   (consumer, relay, producer, admin) into a file only the mysql user can read;
#   sql/zz_grants.sh feeds it to sql/grants/<role>.sql and deletes it. A role
#   without a URL secret gets a random password nobody knows.
# migrate: the same file, on every run (the migrate service re-applies
#   sql/grants/, where a role created by a newer version takes its password
#   from its URL; existing users keep theirs).
# rabbitmq: the user and password of the amqp_url secret become
#   RABBITMQ_DEFAULT_USER/PASS of the server process only (the broker uses
#   them when its database is new).
# Paths can be moved for tests: SIDECAR_SECRETS_DIR (/run/secrets),
# SIDECAR_INIT_DIR (/run/sidecar-init), SIDECAR_DATADIR (/var/lib/mysql).
set -euo pipefail
role=${1:?usage: with-secrets.sh mysql|migrate|rabbitmq ENTRYPOINT...}
shift
secrets=${SIDECAR_SECRETS_DIR:-/run/secrets}

# decode TEXT: percent-decoded (a backslash stays a backslash)
decode() {
    local s=${1//\\/\\\\}
    printf '%b' "${s//%/\\x}"
}

# url_part FILE user|password: that part of the URL in FILE, decoded; fails
# when the URL has none
url_part() {
    local u auth userinfo
    u=$(head -n 1 "$1")
    u=${u#*://}
    auth=${u%%[/?#]*}
    [[ $auth == *@* ]] || return 1
    userinfo=${auth%@*}
    if [ "$2" = user ]; then
        decode "${userinfo%%:*}"
    else
        [[ $userinfo == *:* ]] || return 1
        decode "${userinfo#*:}"
    fi
}

# sql_literal TEXT: TEXT as a single-quoted SQL string
sql_literal() {
    local s=${1//\\/\\\\}
    printf "'%s'" "${s//\'/\'\'}"
}

# role_passwords DIR: SET @sidecar_<role>_password = '...' for each role with
# a URL secret, into DIR/role-passwords.sql (mode 600, DIR mode 700)
role_passwords() {
    local init=$1 out r f pw
    mkdir -p "$init"
    chmod 700 "$init"
    out="$init/role-passwords.sql"
    (
        umask 077
        : >"$out"
        for r in consumer relay producer admin; do
            f="$secrets/${r}_mysql_url"
            [ -r "$f" ] || continue
            pw=$(url_part "$f" password) || continue
            printf 'SET @sidecar_%s_password = %s;\n' "$r" "$(sql_literal "$pw")" >>"$out"
        done
    )
}

case $role in
mysql)
    datadir=${SIDECAR_DATADIR:-/var/lib/mysql}
    init=${SIDECAR_INIT_DIR:-/run/sidecar-init}
    if [ ! -d "$datadir/mysql" ]; then
        role_passwords "$init"
        if id mysql >/dev/null 2>&1; then
            chown -R mysql "$init"
        fi
    fi
    ;;
migrate)
    role_passwords "${SIDECAR_INIT_DIR:-/run/sidecar-init}"
    ;;
rabbitmq)
    f="$secrets/amqp_url"
    if [ -r "$f" ]; then
        RABBITMQ_DEFAULT_USER=$(url_part "$f" user)
        RABBITMQ_DEFAULT_PASS=$(url_part "$f" password)
        export RABBITMQ_DEFAULT_USER RABBITMQ_DEFAULT_PASS
    else
        echo "with-secrets.sh: $f is missing or unreadable" >&2
        exit 1
    fi
    ;;
*)
    echo "with-secrets.sh: unknown role $role (mysql, migrate or rabbitmq)" >&2
    exit 2
    ;;
esac
exec "$@"
