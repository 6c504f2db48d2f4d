#!/bin/bash
# Stand-in for the official mysql image's entrypoint, the parts the compose
# file relies on: MYSQL_DATABASE, MYSQL_USER, MYSQL_PASSWORD,
# MYSQL_ROOT_PASSWORD (each also as *_FILE), MYSQL_RANDOM_ROOT_PASSWORD, and
# /docker-entrypoint-initdb.d/ (top level only: *.sh run or sourced, *.sql,
# *.sql.gz), run once, as the mysql user, against a server that does not
# listen on the network yet (so a TCP healthcheck fails until init is done).
set -eo pipefail
note() { echo "[entrypoint] $*"; }

file_env() { # VAR: value from $VAR or from the file named by $VAR_FILE
    local var=$1 file_var="${1}_FILE" val=
    if [ -n "${!var:-}" ] && [ -n "${!file_var:-}" ]; then
        echo "[entrypoint] both $var and $file_var are set" >&2; exit 1
    fi
    if [ -n "${!var:-}" ]; then val=${!var}; elif [ -n "${!file_var:-}" ]; then val=$(<"${!file_var}"); fi
    export "$var"="$val"
    unset "$file_var"
}

if [ "$1" != mysqld ]; then exec "$@"; fi

if [ "$(id -u)" = 0 ]; then
    # Like the official image: read the *_FILE secrets as root, then run as mysql.
    for v in MYSQL_ROOT_PASSWORD MYSQL_DATABASE MYSQL_USER MYSQL_PASSWORD; do file_env "$v"; done
    mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld /var/lib/mysql
    exec setpriv --reuid=mysql --regid=mysql --init-groups "$BASH_SOURCE" "$@"
fi

SOCK=/run/mysqld/mysqld.sock
if [ ! -d /var/lib/mysql/mysql ]; then
    if [ -z "${MYSQL_ROOT_PASSWORD:-}" ] && [ -z "${MYSQL_RANDOM_ROOT_PASSWORD:-}" ] \
       && [ -z "${MYSQL_ALLOW_EMPTY_PASSWORD:-}" ]; then
        echo "[entrypoint] database is uninitialized and no root password option is given" >&2
        exit 1
    fi
    if [ -n "${MYSQL_RANDOM_ROOT_PASSWORD:-}" ]; then
        export MYSQL_ROOT_PASSWORD=$(head -c 18 /dev/urandom | base64)
        note "GENERATED ROOT PASSWORD: $MYSQL_ROOT_PASSWORD"
    fi
    note "initializing the data directory"
    mariadb-install-db --datadir=/var/lib/mysql --skip-test-db --auth-root-authentication-method=normal \
        >/dev/null
    mariadbd --datadir=/var/lib/mysql --skip-networking --socket="$SOCK" &
    pid=$!
    for i in $(seq 1 60); do
        mariadb-admin --socket="$SOCK" -uroot ping >/dev/null 2>&1 && break
        sleep 0.5
    done
    sql() { mariadb --protocol=socket --socket="$SOCK" -uroot ${MYSQL_ROOT_PASSWORD:+--password="$MYSQL_ROOT_PASSWORD"} "$@"; }
    # Root, the database, the user (no password ever appears on a command line
    # of this script: it is piped in).
    {
        echo "SET @@SESSION.SQL_LOG_BIN=0;"
        echo "DELETE FROM mysql.user WHERE user NOT IN ('mysql.sys', 'mariadb.sys', 'root') OR host NOT IN ('localhost');"
        printf "ALTER USER 'root'@'localhost' IDENTIFIED BY '%s';\n" "${MYSQL_ROOT_PASSWORD//\'/\'\'}"
        printf "CREATE USER 'root'@'%%' IDENTIFIED BY '%s';\n" "${MYSQL_ROOT_PASSWORD//\'/\'\'}"
        echo "GRANT ALL ON *.* TO 'root'@'%' WITH GRANT OPTION;"
        [ -n "${MYSQL_DATABASE:-}" ] && echo "CREATE DATABASE IF NOT EXISTS \`$MYSQL_DATABASE\`;"
        if [ -n "${MYSQL_USER:-}" ] && [ -n "${MYSQL_PASSWORD:-}" ]; then
            printf "CREATE USER '%s'@'%%' IDENTIFIED BY '%s';\n" "$MYSQL_USER" "${MYSQL_PASSWORD//\'/\'\'}"
            [ -n "${MYSQL_DATABASE:-}" ] && echo "GRANT ALL ON \`$MYSQL_DATABASE\`.* TO '$MYSQL_USER'@'%';"
        fi
        echo "FLUSH PRIVILEGES;"
    } | mariadb --protocol=socket --socket="$SOCK" -uroot
    # docker_process_sql, as the official entrypoint offers it to sourced scripts
    docker_process_sql() { MYSQL_PWD="$MYSQL_ROOT_PASSWORD" mariadb --protocol=socket --socket="$SOCK" -uroot ${MYSQL_DATABASE:+--database="$MYSQL_DATABASE"} "$@"; }
    for f in /docker-entrypoint-initdb.d/*; do
        case "$f" in
            *.sh)
                if [ -x "$f" ]; then note "running $f"; "$f"
                else note "sourcing $f"; . "$f"; fi ;;
            *.sql) note "running $f"; docker_process_sql <"$f" ;;
            *.sql.gz) note "running $f"; gunzip -c "$f" | docker_process_sql ;;
            *) [ -e "$f" ] && note "ignoring $f" ;;
        esac
    done
    MYSQL_PWD="$MYSQL_ROOT_PASSWORD" mariadb-admin --socket="$SOCK" -uroot shutdown
    wait "$pid" || true
    note "init done; ready for start up"
fi
exec mariadbd --datadir=/var/lib/mysql --socket="$SOCK" --bind-address=0.0.0.0 --skip-name-resolve
