package testnet

import (
	"net"
	"strconv"
	"testing"
)

func TestAddrsAreDistinctAndBelowTheEphemeralRange(t *testing.T) {
	addrs, err := Addrs(20)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	high := ephemeralStart()
	for _, a := range addrs {
		if seen[a] {
			t.Fatalf("%s handed out twice", a)
		}
		seen[a] = true
		_, p, err := net.SplitHostPort(a)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(p)
		if high-low >= 1000 && (port < low || port >= high) {
			t.Fatalf("port %d outside [%d, %d)", port, low, high)
		}
		// Closed, so a server can bind it.
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("bind %s after Addrs: %v", a, err)
		}
		l.Close()
	}
}
