#!/usr/bin/env bash
# zookeeper.sh: a 3-server ZooKeeper ensemble from Debian's zookeeper on
# 127.0.0.1, with ZooKeeper's defaults (forceSync: fsync on every commit).
# Ports: ZK_CLIENT_PORTS, ZK_QUORUM_PORTS, ZK_ELECTION_PORTS (three each).
# Each JVM gets ZK_HEAP (default 512m).
. "$(dirname "$0")/common.sh"
read -r -a CLIENT <<<"${ZK_CLIENT_PORTS:-21811 21812 21813}"
read -r -a QUORUM <<<"${ZK_QUORUM_PORTS:-22881 22882 22883}"
read -r -a ELECTION <<<"${ZK_ELECTION_PORTS:-23881 23882 23883}"
JAR=/usr/share/java/zookeeper.jar

need_zk() {
	need java default-jre-headless
	[ -f "$JAR" ] || apt_install zookeeper
	[ -f "$JAR" ] || { echo "$JAR missing after installing zookeeper" >&2; exit 1; }
}

# mode PORT: the server's role, from the srvr four-letter command.
mode() {
	exec 3<>"/dev/tcp/127.0.0.1/$1"
	printf srvr >&3
	grep -E '^Mode: (leader|follower|standalone)' <&3
}

case "${1:-}" in
start)
	[ $# = 2 ] || usage "$0"
	need_zk
	dir=$2/zookeeper
	mkdir -p "$dir"
	require_free "${CLIENT[@]}" "${QUORUM[@]}" "${ELECTION[@]}"
	# slf4j-simple logs to stderr, which start_bg sends to the log file.
	cp=$JAR
	[ -f /usr/share/java/slf4j-simple.jar ] && cp+=:/usr/share/java/slf4j-simple.jar
	for i in 0 1 2; do
		n=$((i + 1))
		mkdir -p "$dir/z$n/data"
		echo "$n" >"$dir/z$n/data/myid"
		{
			echo "tickTime=2000"
			echo "initLimit=10"
			echo "syncLimit=5"
			echo "dataDir=$dir/z$n/data"
			echo "clientPort=${CLIENT[i]}"
			echo "clientPortAddress=127.0.0.1"
			echo "maxClientCnxns=0"
			echo "admin.enableServer=false"
			echo "4lw.commands.whitelist=srvr,ruok"
			for j in 0 1 2; do echo "server.$((j + 1))=127.0.0.1:${QUORUM[j]}:${ELECTION[j]}"; done
		} >"$dir/z$n/zoo.cfg"
		echo "+ # $dir/z$n/zoo.cfg: $(tr '\n' ' ' <"$dir/z$n/zoo.cfg")"
		start_bg "$dir/z$n.pid" "$dir/z$n.log" java "-Xmx${ZK_HEAP:-512m}" -Dzookeeper.log.dir="$dir/z$n" \
			-cp "$cp" org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/z$n/zoo.cfg"
	done
	for i in 0 1 2; do
		wait_until 90 "zookeeper z$((i + 1)) to join the quorum" mode "${CLIENT[i]}"
	done
	echo "ENDPOINTS=127.0.0.1:${CLIENT[0]},127.0.0.1:${CLIENT[1]},127.0.0.1:${CLIENT[2]}"
	;;
stop)
	[ $# = 2 ] || usage "$0"
	for n in z1 z2 z3; do stop_pidfile "$2/zookeeper/$n.pid"; done
	;;
version)
	need_zk
	v=$(ls /usr/share/java/zookeeper-[0-9]*.jar 2>/dev/null | head -1)
	v=${v##*/zookeeper-}
	echo "ZooKeeper ${v%.jar} (Debian zookeeper $(pkgver zookeeper)), OpenJDK $(java -version 2>&1 | sed -n '1s/.*"\(.*\)".*/\1/p')"
	;;
*) usage "$0" ;;
esac
