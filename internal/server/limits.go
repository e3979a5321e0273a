package server

import "time"

// Limits bound what clients may take of a member (DESIGN.md section 4):
// each refuses new work, never work already acknowledged, and a refusal
// names the limit and the `baton server` flag that sets it. A zero field
// is no limit; embed.DefaultConfig gives every one its default.
type Limits struct {
	// MaxClientConns bounds the connections open on the client port; one
	// more is closed as soon as it is accepted (--max-client-conns).
	MaxClientConns int
	// HandshakeTimeout bounds the time from accepting a connection until
	// it shows whether it speaks gRPC or HTTP/1, its TLS handshake
	// included, and until an HTTP request's header is read
	// (--conn-handshake-timeout).
	HandshakeTimeout time.Duration
	// IdleTimeout closes an HTTP/1 keep-alive connection idle between
	// requests, and a gRPC connection without a call, for that long
	// (--conn-idle-timeout).
	IdleTimeout time.Duration
}
