package embed

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/internal/testpki"
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

// TestConnTimeouts: the member closes a client connection that has not
// shown whether it speaks gRPC or HTTP/1 within ConnHandshakeTimeout (its
// TLS handshake included), an HTTP request whose header has not come in
// that time, and connections idle for ConnIdleTimeout. Before, a silent
// connection stayed for as long as its client wanted (issue 23).
func TestConnTimeouts(t *testing.T) {
	short := func(_ int, cfg *Config) {
		cfg.ConnHandshakeTimeout = 200 * time.Millisecond
		cfg.ConnIdleTimeout = 200 * time.Millisecond
	}
	t.Run("plain", func(t *testing.T) {
		c := newTestClusterWith(t, 1, short)
		c.waitLeader()
		addr := c.members[0].ClientAddr()
		cases := []struct {
			name string
			send string
		}{
			{"silent", ""},
			// A gRPC client that connected but made no call: the client
			// preface and an empty SETTINGS frame.
			{"HTTP/2 without a call", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"},
			{"HTTP/1 header unfinished", "GET /v1/status HTTP/1.1\r\nHost: member\r\n"},
		}
		for _, tc := range cases {
			conn := dial(t, addr)
			if _, err := io.WriteString(conn, tc.send); err != nil {
				t.Fatal(err)
			}
			if !closedByMember(t, conn) {
				t.Errorf("%s: the connection stayed open", tc.name)
			}
		}

		// Idle HTTP/1 keep-alive connection, after an answer.
		conn := dial(t, addr)
		if _, err := io.WriteString(conn, "GET /v1/status HTTP/1.1\r\nHost: member\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		if !closedByMember(t, conn) {
			t.Error("an idle HTTP/1 keep-alive connection stayed open")
		}

		// Idle gRPC connection, after a call: GOAWAY, and the client's
		// channel leaves READY.
		gc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer gc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := batonpb.NewBatonClient(gc).Status(ctx, &batonpb.StatusRequest{}); err != nil {
			t.Fatal(err)
		}
		if st := gc.GetState(); st != connectivity.Ready || !gc.WaitForStateChange(ctx, st) {
			t.Errorf("an idle gRPC connection stayed %v", gc.GetState())
		}

		metrics := httpGet(t, dial(t, addr), "/metrics")
		if !strings.Contains(metrics, "baton_client_handshakes_failed_total 2\n") {
			t.Errorf("/metrics does not count the silent and the HTTP/2 connection:\n%s", grep(metrics, "handshakes"))
		}
	})
	t.Run("TLS", func(t *testing.T) {
		pki, err := testpki.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		c := newTestClusterWith(t, 1, func(i int, cfg *Config) {
			short(i, cfg)
			cfg.ClientTLS = pki.ServerConfig()
		})
		c.waitLeader()
		addr := c.members[0].ClientAddr()
		silent := dial(t, addr)
		// The start of a ClientHello record that never ends.
		partial := dial(t, addr)
		if _, err := partial.Write([]byte{0x16, 0x03, 0x01, 0x01, 0x00, 0x01}); err != nil {
			t.Fatal(err)
		}
		done, err := tls.Dial("tcp", addr, pki.ClientConfig(true))
		if err != nil {
			t.Fatal(err)
		}
		defer done.Close()
		for name, conn := range map[string]net.Conn{"silent": silent, "ClientHello unfinished": partial, "handshake done, nothing sent": done} {
			if !closedByMember(t, conn) {
				t.Errorf("%s: the connection stayed open", name)
			}
		}
	})
}

// grep returns the lines of s that contain substr.
func grep(s, substr string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
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
// or false if it stayed open for 5 s (a bound for the failure only: the
// member closes it at once, or after a timeout the test set far lower).
func closedByMember(t *testing.T, conn net.Conn) bool {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
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
	conn.SetDeadline(time.Now().Add(5 * time.Second))
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
