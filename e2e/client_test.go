package e2e

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/batonlock/baton/api/batonpb"
)

// router sends calls to the member it believes leads, following
// NOT_LEADER hints and moving to the next endpoint when a member does not
// answer. It uses the generated client only (not package baton), so these
// tests pin the wire contract.
type router struct {
	endpoints []string

	mu     sync.Mutex
	leader string
	next   int
	conns  map[string]*grpc.ClientConn
}

func newRouter(endpoints []string) *router {
	return &router{endpoints: endpoints, conns: map[string]*grpc.ClientConn{}}
}

func (r *router) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = map[string]*grpc.ClientConn{}
}

func (r *router) client(addr string) (batonpb.BatonClient, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.conns[addr]
	if !ok {
		var err error
		c, err = grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		r.conns[addr] = c
	}
	return batonpb.NewBatonClient(c), nil
}

// pick returns the address to try next.
func (r *router) pick() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leader != "" {
		return r.leader
	}
	a := r.endpoints[r.next%len(r.endpoints)]
	r.next++
	return a
}

// hint records what a failed call on addr said about the leader.
func (r *router) hint(addr, leader string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case leader != "" && leader != addr:
		r.leader = leader
	case r.leader == addr || leader == addr:
		// addr claims to lead (or named itself) yet refused: try others.
		r.leader = ""
	}
}

// errInfo returns the ErrorInfo reason and leader_addr of err.
func errInfo(err error) (reason, leader string) {
	st, ok := status.FromError(err)
	if !ok {
		return "", ""
	}
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			return ei.GetReason(), ei.GetMetadata()["leader_addr"]
		}
	}
	return "", ""
}

// retryable reports whether err leaves the outcome unknown or says "not
// here" (so the same request, same seq, should be sent again), as opposed
// to a definite answer.
func retryable(err error) bool {
	reason, _ := errInfo(err)
	switch reason {
	case "NOT_LEADER", "OUTCOME_UNKNOWN", "OVERLOADED":
		return true
	case "":
	default:
		return false // a definite answer (WAIT_TIMED_OUT is one too)
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Unknown, codes.Internal:
		// Canceled/DeadlineExceeded here come from the per-attempt
		// timeout (the caller's ctx is checked separately); Unknown and
		// Internal from a connection torn by a kill.
		return true
	}
	return false
}

// callStats counts what the router saw.
type callStats struct {
	mu        sync.Mutex
	attempts  int
	notLeader int
	unknown   int
	other     int
}

func (s *callStats) note(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	if err == nil {
		return
	}
	switch reason, _ := errInfo(err); reason {
	case "NOT_LEADER":
		s.notLeader++
	case "OUTCOME_UNKNOWN":
		s.unknown++
	default:
		s.other++
	}
}

// do runs f against the leader until it returns nil or a definite error,
// or ctx ends. Each attempt gets attempt as its timeout. f must send the
// same request every time (same session and seq): that is what makes the
// retry of an unknown outcome exactly-once.
func (r *router) do(ctx context.Context, stats *callStats, attempt time.Duration, f func(ctx context.Context, c batonpb.BatonClient) error) error {
	backoff := 20 * time.Millisecond
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		addr := r.pick()
		c, err := r.client(addr)
		if err != nil {
			return err
		}
		actx, cancel := context.WithTimeout(ctx, attempt)
		err = f(actx, c)
		cancel()
		if stats != nil {
			stats.note(err)
		}
		if err == nil || !retryable(err) {
			return err
		}
		if ctx.Err() != nil {
			return errors.Join(ctx.Err(), err)
		}
		_, leader := errInfo(err)
		r.hint(addr, leader)
		if leader != "" && leader != addr {
			continue // a fresh hint: follow it at once
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 300*time.Millisecond)
	}
}
