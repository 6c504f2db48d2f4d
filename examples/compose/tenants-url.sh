#!/bin/sh
# Entrypoint wrapper of the tenants profile's sidecars (docker-compose.yml):
# the tenants' database URL is the role's own URL secret with the database
# name turned into NAME_{tenant} (app -> app_{tenant}), written to a file
# only this container's user can read, so the password keeps one copy at
# rest (the secret) and never enters the environment.
#
#   tenants-url.sh /run/secrets/consumer_mysql_url sidecar consume -c FILE
set -eu
secret=${1:?usage: tenants-url.sh SECRET_FILE COMMAND...}
shift
umask 077
dir=$(mktemp -d)
# the path's last segment is the database; a query string is kept
head -n 1 "$secret" | sed -E 's#/([^/?]+)(\?.*)?$#/\1_{tenant}\2#' >"$dir/url"
grep -q '_{tenant}' "$dir/url" || { echo "tenants-url.sh: $secret names no database" >&2; exit 2; }
export SIDECAR_TENANTS_DATABASE_URL_FILE="$dir/url"
exec "$@"
