package baton

// The client checks what it sends before it sends it, with the rules the
// members apply (package rules): a request that breaks one fails alone and
// at once with ErrInvalidArgument, and never reaches a stream. On the
// Sessions stream, which carries every session of the client, a request
// gRPC could not encode ended the stream, and with it every session's
// channel, over and over as each resumed and sent it again.

import "fmt"

// invalid is this package's error for what a rule refused (nil for nil):
// it matches ErrInvalidArgument, and its message is the rule's, which
// names the value and what is wrong with it.
func invalid(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
}
