package embedtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
)

// Network is a network in memory: listeners on made-up loopback
// addresses, and a dialer that connects to them through net.Pipe. Its
// connections block on channels only, so members, gRPC servers and
// clients on it run inside a testing/synctest bubble, on the bubble's
// clock; and it takes no port. Make it inside the bubble that uses it.
type Network struct {
	mu        sync.Mutex
	lastPort  int
	listeners map[string]*Listener
}

// NewNetwork is an empty network.
func NewNetwork() *Network {
	return &Network{listeners: map[string]*Listener{}}
}

// Listen listens on addr, or on a new address if addr is "". An address
// is free again once its listener is closed (a member restarted on its
// old addresses listens on them again).
func (n *Network) Listen(addr string) (*Listener, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if addr == "" {
		n.lastPort++
		addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(n.lastPort))
	}
	if _, ok := n.listeners[addr]; ok {
		return nil, fmt.Errorf("embedtest: listen on %s: address already in use", addr)
	}
	l := &Listener{net: n, addr: pipeAddr(addr), conns: make(chan net.Conn), closed: make(chan struct{})}
	n.listeners[addr] = l
	return l, nil
}

// Dial connects to the listener on addr; it has the signature of
// grpc.WithContextDialer's and of embed.Config.PeerDial. With no
// listener there, the connection is refused at once, as on TCP.
func (n *Network) Dial(ctx context.Context, addr string) (net.Conn, error) {
	n.mu.Lock()
	l := n.listeners[addr]
	n.mu.Unlock()
	if l == nil {
		return nil, &net.OpError{Op: "dial", Net: "pipe", Addr: pipeAddr(addr), Err: errRefused}
	}
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
		return nil, &net.OpError{Op: "dial", Net: "pipe", Addr: pipeAddr(addr), Err: errRefused}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// errRefused is what dialling an address nobody listens on returns, as
// on TCP: it matches syscall.ECONNREFUSED.
var errRefused = os.NewSyscallError("connect", syscall.ECONNREFUSED)

// Listener is a listener of a Network: Accept returns the server's end
// of each connection dialled to its address.
type Listener struct {
	net    *Network
	addr   pipeAddr
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

// Accept waits for the next connection dialled to l.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close stops l and frees its address.
func (l *Listener) Close() error {
	l.once.Do(func() {
		close(l.closed)
		l.net.mu.Lock()
		if l.net.listeners[string(l.addr)] == l {
			delete(l.net.listeners, string(l.addr))
		}
		l.net.mu.Unlock()
	})
	return nil
}

// Addr is the address l listens on.
func (l *Listener) Addr() net.Addr { return l.addr }

// pipeAddr is an address of a Network: host:port, as a TCP address is
// written, so that configurations and gRPC take it unchanged.
type pipeAddr string

func (pipeAddr) Network() string  { return "pipe" }
func (a pipeAddr) String() string { return string(a) }
