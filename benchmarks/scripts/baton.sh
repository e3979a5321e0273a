#!/usr/bin/env bash
# baton.sh: a 3-node Baton cluster on 127.0.0.1, built from this checkout
# (../cmd/baton) with the server's defaults (fsync on). The binary is
# DIR/baton/baton, so the runner can call `baton bench` with it.
# Ports: BATON_CLIENT_PORTS and BATON_PEER_PORTS (three each).
. "$(dirname "$0")/common.sh"
read -r -a CLIENT <<<"${BATON_CLIENT_PORTS:-27700 27710 27720}"
read -r -a PEER <<<"${BATON_PEER_PORTS:-27701 27711 27721}"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

# leader PORT: true once the member at PORT knows a leader.
leader() {
	curl -sf "http://127.0.0.1:$1/v1/status" | grep -Eq '"leader_?[aA]ddr": ?"[^"]'
}

case "${1:-}" in
start)
	[ $# = 2 ] || usage "$0"
	need go golang-go
	dir=$2/baton
	mkdir -p "$dir"
	require_free "${CLIENT[@]}" "${PEER[@]}"
	echo "+ (cd $ROOT && go build -o $dir/baton ./cmd/baton)"
	(cd "$ROOT" && go build -o "$dir/baton" ./cmd/baton)
	cluster=""
	for i in 0 1 2; do cluster+="${cluster:+,}n$((i + 1))=127.0.0.1:${PEER[i]}"; done
	for i in 0 1 2; do
		n=n$((i + 1))
		start_bg "$dir/$n.pid" "$dir/$n.log" "$dir/baton" server --name "$n" --data-dir "$dir/$n" \
			--client-addr "127.0.0.1:${CLIENT[i]}" --peer-addr "127.0.0.1:${PEER[i]}" --initial-cluster "$cluster"
	done
	for i in 0 1 2; do
		wait_until 60 "baton n$((i + 1)) to know its leader" leader "${CLIENT[i]}"
	done
	echo "ENDPOINTS=127.0.0.1:${CLIENT[0]},127.0.0.1:${CLIENT[1]},127.0.0.1:${CLIENT[2]}"
	;;
stop)
	[ $# = 2 ] || usage "$0"
	for n in n1 n2 n3; do stop_pidfile "$2/baton/$n.pid"; done
	;;
version)
	echo "Baton $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown) (this checkout), $(go version | cut -d' ' -f3)"
	;;
*) usage "$0" ;;
esac
