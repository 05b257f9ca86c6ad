#!/usr/bin/env bash
# Start, stop or inspect a private PostgreSQL cluster that listens only on a
# unix socket inside its own directory.
#
#   scripts/pgcluster.sh start DIR [PORT] [--throwaway]
#   scripts/pgcluster.sh stop DIR
#   scripts/pgcluster.sh dsn DIR
#
# DIR holds data/, run/ (the socket) and log.  The bootstrap superuser is
# "postgres".  PostgreSQL refuses to run as root, so under root the cluster
# runs as the "postgres" system user (created by Debian's postgresql
# packages); otherwise as the invoking user.  --throwaway turns off crash
# safety for speed: for test clusters only.
set -euo pipefail

usage() { echo "usage: $0 start|stop|dsn DIR [PORT] [--throwaway]" >&2; exit 2; }
[ $# -ge 2 ] || usage
action=$1
dir=$(realpath -m "$2")
port=${3:-54329}
throwaway=false
[ "${4:-}" = "--throwaway" ] && throwaway=true

pg_config=${PG_CONFIG:-$(ls /usr/lib/postgresql/15/bin/pg_config 2>/dev/null || command -v pg_config)}
bindir=$("$pg_config" --bindir)

if [ "$(id -u)" = 0 ]; then
  owner=postgres
  as_owner() { (cd / && runuser -u postgres -- "$@"); }
else
  owner=$(id -un)
  as_owner() { "$@"; }
fi

dsn() {
  echo "host=$dir/run port=$(cat "$dir/port" 2>/dev/null || echo "$port") user=postgres dbname=postgres"
}

start() {
  # The server must be able to reach DIR, and a socket path has at most 107
  # bytes: otherwise keep the cluster under /tmp and leave a symlink at DIR.
  local parent
  parent=$(dirname "$dir")
  mkdir -p "$parent"
  if { [ "$owner" = postgres ] && ! runuser -u postgres -- test -x "$parent"; } ||
     [ ${#dir} -gt 80 ]; then
    local real
    real=/tmp/nearsim-cluster-$(printf '%s' "$dir" | md5sum | cut -c1-12)
    mkdir -p "$real"
    ln -sfn "$real" "$dir"
    dir=$real
  fi
  mkdir -p "$dir"
  chown "$owner" "$dir"
  if [ ! -s "$dir/data/PG_VERSION" ]; then
    rm -rf "$dir/data"
    as_owner "$bindir/initdb" --pgdata="$dir/data" --username=postgres --auth=trust \
      --encoding=UTF8 --locale=C.UTF-8 --no-sync >"$dir/initdb.log" 2>&1 ||
      { cat "$dir/initdb.log" >&2; exit 1; }
    as_owner mkdir -p "$dir/run"
    {
      echo "listen_addresses = ''"
      echo "unix_socket_directories = '$dir/run'"
      echo "port = $port"
      if $throwaway; then
        echo "fsync = off"
        echo "synchronous_commit = off"
        echo "full_page_writes = off"
      fi
    } | as_owner tee -a "$dir/data/postgresql.conf" >/dev/null
    echo "$port" >"$dir/port"
  fi
  if as_owner "$bindir/pg_ctl" status --pgdata="$dir/data" >/dev/null 2>&1; then
    return 0
  fi
  as_owner "$bindir/pg_ctl" start --pgdata="$dir/data" --log="$dir/data/server.log" --wait >/dev/null ||
    { tail -n 20 "$dir/data/server.log" >&2; exit 1; }
}

stop() {
  if [ -d "$dir/data" ] && as_owner "$bindir/pg_ctl" status --pgdata="$dir/data" >/dev/null 2>&1; then
    as_owner "$bindir/pg_ctl" stop --pgdata="$dir/data" --mode=fast --wait >/dev/null
  fi
}

case $action in
  start) start; dsn ;;
  stop) stop ;;
  dsn) dsn ;;
  *) usage ;;
esac
