package server

import (
	"io"
	"testing"

	"github.com/batonlock/baton/api/wire"
)

// chunks is a connection's first bytes as they arrive; reading past them
// is a matcher waiting for bytes a client never sends, and fails the test.
type chunks struct {
	t    *testing.T
	data []string
}

func (c *chunks) Read(b []byte) (int, error) {
	if len(c.data) == 0 {
		c.t.Fatal("the matcher read past what the client sent: it would wait for ever")
		return 0, io.EOF
	}
	n := copy(b, c.data[0])
	if c.data[0] = c.data[0][n:]; c.data[0] == "" {
		c.data = c.data[1:]
	}
	return n, nil
}

// The client port tells Sessions connections from gRPC and HTTP by their
// first bytes, reading no more than the client sends before it waits.
func TestMatchPreface(t *testing.T) {
	p := wire.SessionsPreface
	for _, tc := range []struct {
		name string
		sent []string
		want bool
	}{
		{"preface", []string{p}, true},
		{"preface in pieces", []string{p[:1], p[1:20], p[20:]}, true},
		{"HTTP/2", []string{"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"}, false},
		{"short HTTP/1 request sharing the first letter", []string{"BIND / HTTP/1.1\r\n\r\n"}, false},
		{"a prefix of the preface, then something else", []string{p[:10], "x"}, false},
	} {
		if got := matchPreface(p)(&chunks{t, tc.sent}); got != tc.want {
			t.Errorf("%s: matched %v, want %v", tc.name, got, tc.want)
		}
	}
}
