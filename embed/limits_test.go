package embed

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestClientConnLimit: with MaxClientConns open, the member closes a new
// connection as soon as it accepts it, counts it in /metrics, and admits
// one again once a connection closed (issue 23: idle connections used to
// take every file descriptor until the member could not write its log).
func TestClientConnLimit(t *testing.T) {
	c := newTestClusterWith(t, 1, func(_ int, cfg *Config) { cfg.MaxClientConns = 2 })
	c.waitLeader()
	addr := c.members[0].ClientAddr()
	// Accepted in the order they connected: a and the next take both
	// places.
	a := dial(t, addr)
	dial(t, addr)
	over := dial(t, addr)
	if !closedByMember(t, over) {
		t.Fatal("a connection over MaxClientConns stayed open")
	}
	// a asks for the metrics and is closed after the answer; by the time
	// its end reaches this side the member has given its place back.
	metrics := httpGet(t, a, "/metrics")
	for _, want := range []string{"baton_client_connections 2\n", "baton_client_connections_limit 2\n", "baton_client_connections_refused_total 1\n"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", strings.TrimSpace(want))
		}
	}
	if got := httpGet(t, dial(t, addr), "/v1/status"); !strings.HasPrefix(got, "HTTP/1.1 200") {
		t.Fatalf("a connection after one closed: %.80q", got)
	}
}

// dial connects to addr; the test's end closes the connection.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// closedByMember reads conn until the member closes it and reports true,
// or false if it stayed open for 10 s (a bound for the failure only: the
// member closes it at once, or after a timeout the test set far lower).
func closedByMember(t *testing.T, conn net.Conn) bool {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 512)
	for {
		if _, err := conn.Read(buf); err != nil {
			ne, ok := err.(net.Error)
			return !ok || !ne.Timeout()
		}
	}
}

// httpGet sends GET path on conn with "Connection: close" and returns the
// whole answer, status line first, once the member closed the connection.
func httpGet(t *testing.T, conn net.Conn, path string) string {
	t.Helper()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: member\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	// The member closes after the answer ("Connection: close").
	if !closedByMember(t, conn) {
		t.Fatalf("GET %s: the member kept the connection open after answering", path)
	}
	return resp.Proto + " " + resp.Status + "\n" + string(body)
}

func TestDefaultMaxClientConns(t *testing.T) {
	tests := []struct {
		nofile uint64
		want   int
	}{
		{20000, 10000}, // this project's test machines: the ceiling
		{10240, 9216},
		{4096, 3072},
		{2048, 1024}, // from here on half, so clients still get some
		{1024, 512},
		{1, 1},
		{0, 1},
		{^uint64(0), 10000}, // RLIM_INFINITY
	}
	for _, tt := range tests {
		if got := DefaultMaxClientConns(tt.nofile); got != tt.want {
			t.Errorf("DefaultMaxClientConns(%d) = %d, want %d", tt.nofile, got, tt.want)
		}
	}
}
