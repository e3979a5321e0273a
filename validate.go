package baton

// The client checks what it sends before it sends it, with the rules the
// members apply (package rules): a request that breaks one fails alone and
// at once with ErrInvalidArgument, and never reaches a stream. On the
// Sessions stream, which carries every session of the client, a request
// gRPC could not encode ended the stream, and with it every session's
// channel, over and over as each resumed and sent it again.

import (
	"fmt"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/api/wire"
)

// invalid is this package's error for what a rule refused (nil for nil):
// it matches ErrInvalidArgument, and its message is the rule's, which
// names the value and what is wrong with it.
func invalid(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
}

// sendOverhead bounds what a send adds to a request: its id and header
// (stamp), its channel, and its field's tag and length in the batch.
const sendOverhead = 96

// sendable returns nil if r can be sent on a stream, or an error matching
// ErrInvalidArgument: r does not encode, or is more than a member reads in
// one message. Every session request passes it before it is queued
// (startLocked, dialStream), whatever checks built it, so that a request
// the checks of its method missed still fails alone: gRPC ends a stream
// whose message it cannot encode, and a member one whose message is too
// big, which for the Sessions stream is every session's channel.
func sendable(r *batonpb.SessionRequest) error {
	n, err := wire.CheckSessionRequest(r)
	if err != nil {
		return fmt.Errorf("%w: the request cannot be encoded: %w", ErrInvalidArgument, err)
	}
	if n+sendOverhead > rules.MaxRequestBytes {
		return fmt.Errorf("%w: the request is %d bytes; a member reads at most %d in one message", ErrInvalidArgument, n, rules.MaxRequestBytes)
	}
	return nil
}
