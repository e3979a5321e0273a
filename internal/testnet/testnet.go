// Package testnet gives tests loopback ports that no outgoing connection
// can take.
//
// A port from Listen("127.0.0.1:0") lies in the kernel's ephemeral range,
// the same range the kernel picks the local ports of outgoing connections
// from. A test that closes such a port to hand its address to a server
// (a process, or a member restarted on its old address) races every
// connection the machine opens meanwhile, and with test packages running
// side by side one of them wins now and then (CI, stop 13: "bind: address
// already in use" on a port a long-lived connection held). Ports below the
// ephemeral range are only ever taken by an explicit bind.
package testnet

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// low is the first port handed out; below it live well-known services.
const low = 10000

// Listen binds a TCP port on 127.0.0.1 below the ephemeral range. Where
// that range starts too low to leave room, it falls back to port 0.
func Listen() (net.Listener, error) {
	high := ephemeralStart()
	if high-low < 1000 {
		return net.Listen("tcp", "127.0.0.1:0")
	}
	var err error
	for range 200 {
		port := low + rand.IntN(high-low)
		var l net.Listener
		if l, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			return l, nil
		}
	}
	return nil, fmt.Errorf("testnet: no free port below %d: %w", high, err)
}

// Addrs reserves n distinct addresses from Listen and closes them, for a
// server that must bind them itself (another process).
func Addrs(n int) ([]string, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	out := make([]string, 0, n)
	for range n {
		l, err := Listen()
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}

// ephemeralStart is the first port of the kernel's ephemeral range
// (Linux), 32768 where it cannot be read.
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= 0 {
		return 32768
	}
	return n
}
