package server

// Limits bound what clients may take of a member (DESIGN.md section 4):
// each refuses new work, never work already acknowledged, and a refusal
// names the limit and the `baton server` flag that sets it. A zero field
// is no limit; embed.DefaultConfig gives every one its default.
type Limits struct {
	// MaxClientConns bounds the connections open on the client port; one
	// more is closed as soon as it is accepted (--max-client-conns).
	MaxClientConns int
}
