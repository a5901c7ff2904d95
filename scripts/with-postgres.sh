#!/usr/bin/env bash
# Runs a command against a throwaway PostgreSQL server on loopback, started here and stopped
# after: `scripts/with-postgres.sh make test`. Installs Debian's postgresql when missing.
set -euo pipefail

bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
  echo "Installing Debian's postgresql..."
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
fi

dir=$(mktemp -d /tmp/argus-pg-XXXXXX)
port=${ARGUS_PG_PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
# PostgreSQL refuses to run as root: the server runs as the package's `postgres` user.
as_pg=()
if [ "$(id -u)" = 0 ]; then
  id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
  chown postgres "$dir"
  as_pg=(runuser -u postgres --)
fi

stop() {
  "${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -m fast stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap stop EXIT

"${as_pg[@]}" "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >/dev/null
"${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
  -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=200" start >/dev/null
"$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -q -c "CREATE ROLE argus LOGIN CREATEDB PASSWORD 'argus'"
"$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -q -c "CREATE DATABASE argus OWNER argus"

echo "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port"
DATABASE_URL="postgres://argus:argus@127.0.0.1:$port/argus" "$@"
