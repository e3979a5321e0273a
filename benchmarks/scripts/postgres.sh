#!/usr/bin/env bash
# postgres.sh: one PostgreSQL from Debian's postgresql on 127.0.0.1, with
# the server's defaults (advisory locks are in memory whatever they are),
# trust authentication for the user postgres. Port: POSTGRES_PORT.
. "$(dirname "$0")/common.sh"
PORT=${POSTGRES_PORT:-25432}

# bindir prints the newest installed server's bin directory, installing
# Debian's postgresql if there is none.
bindir() {
	ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || apt_install postgresql
	dirname "$(ls /usr/lib/postgresql/*/bin/postgres | sort -V | tail -1)"
}

# as_pg CMD...: run CMD as the postgres user when we are root (initdb and
# postgres refuse to run as root).
as_pg() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

case "${1:-}" in
start)
	[ $# = 2 ] || usage "$0"
	bin=$(bindir)
	dir=$2/postgres
	require_free "$PORT"
	mkdir -p "$dir"
	if [ "$(id -u)" = 0 ]; then
		chmod o+x "$2"
		chown postgres: "$dir"
	fi
	show "$bin/initdb" -D "$dir/data" -U postgres --auth=trust
	as_pg "$bin/initdb" -D "$dir/data" -U postgres --auth=trust >"$dir/initdb.log" 2>&1
	opts="-c listen_addresses=127.0.0.1 -p $PORT -k $dir"
	show "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -o "$opts" start
	as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 -o "$opts" start >/dev/null
	echo "ENDPOINTS=127.0.0.1:$PORT"
	;;
stop)
	[ $# = 2 ] || usage "$0"
	dir=$2/postgres
	# pg_ctl stop signals the PID recorded in data/postmaster.pid.
	[ -f "$dir/data/postmaster.pid" ] || exit 0
	as_pg "$(bindir)/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
	;;
version)
	bin=$(bindir)
	echo "PostgreSQL $("$bin/postgres" --version | sed -n 's/^postgres (PostgreSQL) \([^ ]*\).*/\1/p') (Debian postgresql-$(basename "$(dirname "$bin")") $(pkgver "postgresql-$(basename "$(dirname "$bin")")"))"
	;;
*) usage "$0" ;;
esac
