#!/usr/bin/env bash
# redis.sh: one Redis from Debian's redis-server on 127.0.0.1, in memory
# only (no RDB snapshots, no AOF, so no fsync), as Redis locks are run.
# Port: REDIS_PORT.
. "$(dirname "$0")/common.sh"
PORT=${REDIS_PORT:-26379}

case "${1:-}" in
start)
	[ $# = 2 ] || usage "$0"
	need redis-server redis-server
	dir=$2/redis
	mkdir -p "$dir"
	require_free "$PORT"
	start_bg "$dir/redis.pid" "$dir/redis.log" redis-server --port "$PORT" --bind 127.0.0.1 \
		--save "" --appendonly no --dir "$dir" --daemonize no
	wait_until 30 "redis" port_open "$PORT"
	echo "ENDPOINTS=127.0.0.1:$PORT"
	;;
stop)
	[ $# = 2 ] || usage "$0"
	stop_pidfile "$2/redis/redis.pid"
	;;
version)
	need redis-server redis-server
	echo "Redis $(redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p') (Debian redis-server $(pkgver redis-server))"
	;;
*) usage "$0" ;;
esac
