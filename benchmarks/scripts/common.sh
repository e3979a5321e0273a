# common.sh: helpers sourced by the start/stop scripts in this folder.
#
# Every script takes `start DIR`, `stop DIR` or `version`. start puts all
# data, logs and PID files under DIR, listens on 127.0.0.1 only, waits
# until the system serves, and prints the commands it ran as "+ ..." lines
# and, last, "ENDPOINTS=host:port,...". stop kills only the processes whose
# PIDs start recorded in DIR.
set -euo pipefail

# apt_install PACKAGE: install a Debian package (apt-get update first if the
# package lists are stale). The package's own service may be started by
# apt on a systemd host; it listens on the default port, which none of
# these scripts use.
apt_install() {
	echo "installing $1 from Debian" >&2
	local sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	if ! $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$1" >&2; then
		$sudo apt-get update >&2
		$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$1" >&2
	fi
}

# need CMD PACKAGE: install PACKAGE if the command CMD is missing.
need() {
	command -v "$1" >/dev/null 2>&1 && return 0
	apt_install "$2"
	command -v "$1" >/dev/null 2>&1 || { echo "$1 still missing after installing $2" >&2; exit 1; }
}

# port_open PORT: true if something accepts connections on 127.0.0.1:PORT.
port_open() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# require_free PORT...: fail if any port is taken, so we never talk to a
# server that someone else started.
require_free() {
	local p
	for p in "$@"; do
		if port_open "$p"; then
			echo "127.0.0.1:$p is already in use; set the port variables to free ports" >&2
			exit 1
		fi
	done
}

# show CMD...: print "+ CMD" with each argument quoted only if it needs it.
show() {
	local a out="+"
	for a in "$@"; do
		if [[ $a =~ ^[A-Za-z0-9_./:=,@%+-]+$ ]]; then
			out+=" $a"
		else
			out+=" '${a//\'/\'\\\'\'}'"
		fi
	done
	echo "$out"
}

# pkgver PACKAGE: the installed Debian version of PACKAGE.
pkgver() {
	dpkg-query -W -f '${Version}' "$1" 2>/dev/null || echo "not from a Debian package"
}

# start_bg PIDFILE LOGFILE CMD...: run CMD in the background with its
# output in LOGFILE and record its PID.
start_bg() {
	local pidfile=$1 logfile=$2
	shift 2
	show "$@"
	"$@" </dev/null >>"$logfile" 2>&1 &
	echo $! >"$pidfile"
}

# wait_until SECONDS DESCRIPTION CMD...: retry CMD every 0.2 s.
wait_until() {
	local deadline=$((SECONDS + $1)) what=$2
	shift 2
	until "$@" >/dev/null 2>&1; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			echo "timed out waiting for $what" >&2
			return 1
		fi
		sleep 0.2
	done
}

# stop_pidfile PIDFILE: TERM the recorded process, KILL it after 10 s.
stop_pidfile() {
	local pidfile=$1 pid i
	[ -f "$pidfile" ] || return 0
	pid=$(cat "$pidfile")
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		for i in $(seq 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.2
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$pidfile"
}

# usage NAME: the common usage line.
usage() {
	echo "usage: $1 start DIR | stop DIR | version" >&2
	exit 2
}
