#!/usr/bin/env bash
# etcd.sh: a 3-member etcd cluster from Debian's etcd-server on 127.0.0.1,
# with etcd's defaults (fsync on every commit).
# Ports: ETCD_CLIENT_PORTS and ETCD_PEER_PORTS (three each).
. "$(dirname "$0")/common.sh"
read -r -a CLIENT <<<"${ETCD_CLIENT_PORTS:-23791 23792 23793}"
read -r -a PEER <<<"${ETCD_PEER_PORTS:-23801 23802 23803}"

case "${1:-}" in
start)
	[ $# = 2 ] || usage "$0"
	need etcd etcd-server
	dir=$2/etcd
	mkdir -p "$dir"
	require_free "${CLIENT[@]}" "${PEER[@]}"
	cluster=""
	for i in 0 1 2; do cluster+="${cluster:+,}e$((i + 1))=http://127.0.0.1:${PEER[i]}"; done
	for i in 0 1 2; do
		n=e$((i + 1))
		start_bg "$dir/$n.pid" "$dir/$n.log" etcd --name "$n" --data-dir "$dir/$n" \
			--listen-client-urls "http://127.0.0.1:${CLIENT[i]}" --advertise-client-urls "http://127.0.0.1:${CLIENT[i]}" \
			--listen-peer-urls "http://127.0.0.1:${PEER[i]}" --initial-advertise-peer-urls "http://127.0.0.1:${PEER[i]}" \
			--initial-cluster "$cluster" --initial-cluster-token baton-bench --initial-cluster-state new
	done
	for i in 0 1 2; do
		wait_until 60 "etcd e$((i + 1)) health" sh -c "curl -sf http://127.0.0.1:${CLIENT[i]}/health | grep -q '\"health\":\"true\"'"
	done
	echo "ENDPOINTS=127.0.0.1:${CLIENT[0]},127.0.0.1:${CLIENT[1]},127.0.0.1:${CLIENT[2]}"
	;;
stop)
	[ $# = 2 ] || usage "$0"
	for n in e1 e2 e3; do stop_pidfile "$2/etcd/$n.pid"; done
	;;
version)
	need etcd etcd-server
	echo "etcd $(etcd --version | sed -n 's/^etcd Version: //p') (Debian etcd-server $(pkgver etcd-server))"
	;;
*) usage "$0" ;;
esac
