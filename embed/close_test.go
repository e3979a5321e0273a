package embed_test

import (
	"net"
	"testing"
	"time"
)

// TestCloseWithIdleClientConnections: a member stops although clients hold
// connections to its client port that have not sent a request yet, one
// silent since it connected and one that sent HTTP/2's preface only (as a
// gRPC client does when it connects before its first call). The port's
// multiplexer reads such a connection until it can tell gRPC from HTTP,
// and its Close used to wait for that read, so Close (and `baton server`
// on SIGTERM) hung for as long as the client stayed (found by
// TestLibraryChaos, whose client reconnects to members as they restart).
func TestCloseWithIdleClientConnections(t *testing.T) {
	c := startCluster(t, 1, snapshotOften)
	c.WaitLeader()
	addr := c.ClientAddr(0)
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	preface, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer preface.Close()
	// The client preface and an empty SETTINGS frame.
	if _, err := preface.Write(append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 4, 0, 0, 0, 0, 0)); err != nil {
		t.Fatal(err)
	}

	closed := make(chan struct{})
	go func() {
		c.Stop(0)
		close(closed)
	}()
	// A bound for the failure only: Close takes milliseconds.
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return while idle client connections stayed open")
	}
	// The member dropped them.
	for _, conn := range []net.Conn{silent, preface} {
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 512)
		for {
			if _, err := conn.Read(buf); err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Fatalf("connection from %v still open after Close", conn.LocalAddr())
				}
				break
			}
		}
	}
}
