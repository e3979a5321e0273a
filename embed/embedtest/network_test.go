package embedtest

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/batonlock/baton/api/batonpb"
)

// TestNetwork: a dial reaches the listener on its address and nothing
// else; an address in use is refused, and free again once its listener
// closed. In a bubble, so its connections block on channels only.
func TestNetwork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := NewNetwork()
		l, err := n.Listen("")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		if l2, err := n.Listen(""); err != nil || l2.Addr().String() == addr {
			t.Fatalf("a second new address: %v, %v; want one other than %s", l2, err, addr)
		}
		if _, err := n.Listen(addr); err == nil {
			t.Fatalf("listening twice on %s succeeded", addr)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			t.Fatalf("address %q is not host:port: %v", addr, err)
		}
		if _, err := n.Dial(context.Background(), "127.0.0.1:9"); err == nil {
			t.Fatal("a dial to an address nothing listens on succeeded")
		}

		go func() {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			io.Copy(c, c) // echo
		}()
		c, err := n.Dial(context.Background(), addr)
		if err != nil {
			t.Fatal(err)
		}
		go c.Write([]byte("ping"))
		buf := make([]byte, 4)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("echo: %q, %v", buf, err)
		}
		c.Close()

		l.Close()
		if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept on a closed listener: %v, want net.ErrClosed", err)
		}
		if _, err := n.Dial(context.Background(), addr); err == nil {
			t.Fatal("a dial to a closed listener succeeded")
		}
		l3, err := n.Listen(addr)
		if err != nil {
			t.Fatalf("listening again on a freed address: %v", err)
		}
		l3.Close()
	})
}

// TestInMemoryRestart: a member of an InMemory cluster stops, starts
// again from its disk on its old addresses, and serves; nothing outlives
// the bubble.
func TestInMemoryRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(t, 3, InMemory())
		lead := c.WaitLeader()
		c.Stop(lead)
		if c.WaitLeader() == lead {
			t.Fatal("the stopped member still leads")
		}
		c.Start(lead)
		if _, err := c.Client(lead).Status(context.Background(), &batonpb.StatusRequest{}); err != nil {
			t.Fatalf("status of the restarted member: %v", err)
		}
		WaitFor(t, 10*time.Second, "the restarted member to know the leader", func() bool {
			return c.Member(lead).Status().Leader != 0
		})
	})
}
