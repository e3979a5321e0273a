package server

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
	"github.com/batonlock/baton/internal/liveness"
	"github.com/batonlock/baton/internal/raftnode"
)

// ErrorDomain is the ErrorInfo domain of every Baton error.
const ErrorDomain = "batonlock.io"

// errInvalid marks a request refused by validation in this package.
var errInvalid = errors.New("invalid argument")

func invalidf(format string, args ...any) error {
	return wrapf(errInvalid, format, args...)
}

// wrapf is an error matching err whose message says what went wrong.
func wrapf(err error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", err, fmt.Sprintf(format, args...))
}

// errorMap is the one table from internal errors to gRPC codes and
// Reasons, matched in order with errors.Is.
var errorMap = []struct {
	err    error
	code   codes.Code
	reason batonpb.Reason
}{
	{errInvalid, codes.InvalidArgument, batonpb.Reason_INVALID_ARGUMENT},
	{fsm.ErrInvalidArgument, codes.InvalidArgument, batonpb.Reason_INVALID_ARGUMENT},
	{fsm.ErrSessionNotFound, codes.NotFound, batonpb.Reason_SESSION_NOT_FOUND},
	{fsm.ErrLockNotFound, codes.NotFound, batonpb.Reason_LOCK_NOT_FOUND},
	{fsm.ErrNotHolder, codes.FailedPrecondition, batonpb.Reason_NOT_HOLDER},
	{fsm.ErrTokenMismatch, codes.FailedPrecondition, batonpb.Reason_TOKEN_MISMATCH},
	{fsm.ErrBlacklisted, codes.PermissionDenied, batonpb.Reason_BLACKLISTED},
	{fsm.ErrTooManyWaiters, codes.ResourceExhausted, batonpb.Reason_TOO_MANY_WAITERS},
	{fsm.ErrTooManyPending, codes.ResourceExhausted, batonpb.Reason_TOO_MANY_PENDING},
	{fsm.ErrTooManyHolds, codes.ResourceExhausted, batonpb.Reason_TOO_MANY_HOLDS},
	{fsm.ErrLimitMismatch, codes.FailedPrecondition, batonpb.Reason_LIMIT_MISMATCH},
	{fsm.ErrSecretMismatch, codes.PermissionDenied, batonpb.Reason_SECRET_MISMATCH},
	{fsm.ErrPermissionDenied, codes.PermissionDenied, batonpb.Reason_NOT_PERMITTED},
	// ABORTED, not FAILED_PRECONDITION: nothing is wrong with the request
	// or the system; it lost a conflict with concurrent holders, and the
	// caller retries at a higher level (release what it holds, start the
	// sequence again), which is what ABORTED tells (HTTP 409).
	{fsm.ErrDeadlock, codes.Aborted, batonpb.Reason_DEADLOCK},
	{fsm.ErrRefused, codes.FailedPrecondition, batonpb.Reason_REASON_UNSPECIFIED},
	{errNotPermitted, codes.PermissionDenied, batonpb.Reason_NOT_PERMITTED},
	{errNoCredentials, codes.Unauthenticated, batonpb.Reason_NO_CREDENTIALS},
	{fsm.ErrStaleSequence, codes.FailedPrecondition, batonpb.Reason_STALE_SEQUENCE},
	{fsm.ErrNotWaiting, codes.FailedPrecondition, batonpb.Reason_NOT_WAITING},
	{fsm.ErrWaitCancelled, codes.Canceled, batonpb.Reason_WAIT_CANCELLED},
	{fsm.ErrWaitTimedOut, codes.DeadlineExceeded, batonpb.Reason_WAIT_TIMED_OUT},
	{liveness.ErrSessionLost, codes.NotFound, batonpb.Reason_SESSION_EXPIRED},
	{liveness.ErrBlacklisted, codes.PermissionDenied, batonpb.Reason_BLACKLISTED},
	{liveness.ErrHoldLost, codes.NotFound, batonpb.Reason_HOLD_LOST},
	{liveness.ErrSecretMismatch, codes.PermissionDenied, batonpb.Reason_SECRET_MISMATCH},
	{liveness.ErrNotLeader, codes.Unavailable, batonpb.Reason_NOT_LEADER},
	{raftnode.ErrNotLeader, codes.Unavailable, batonpb.Reason_NOT_LEADER},
	{raftnode.ErrOutcomeUnknown, codes.Unavailable, batonpb.Reason_OUTCOME_UNKNOWN},
	{raftnode.ErrOverloaded, codes.ResourceExhausted, batonpb.Reason_OVERLOADED},
	{errTooManySessions, codes.ResourceExhausted, batonpb.Reason_TOO_MANY_SESSIONS},
	{errKeepAliveRate, codes.ResourceExhausted, batonpb.Reason_OVERLOADED},
	{errNoSpace, codes.ResourceExhausted, batonpb.Reason_NO_SPACE},
	{raftnode.ErrStopped, codes.Unavailable, batonpb.Reason_NOT_LEADER},
	{errMemberExists, codes.AlreadyExists, batonpb.Reason_REASON_UNSPECIFIED},
	{errNoSuchMember, codes.NotFound, batonpb.Reason_REASON_UNSPECIFIED},
	{errNotCaughtUp, codes.FailedPrecondition, batonpb.Reason_REASON_UNSPECIFIED},
	{raftnode.ErrConfChangePending, codes.Aborted, batonpb.Reason_REASON_UNSPECIFIED},
	{raftnode.ErrLogVersion, codes.FailedPrecondition, batonpb.Reason_REASON_UNSPECIFIED},
	{raftnode.ErrNoTransferee, codes.FailedPrecondition, batonpb.Reason_REASON_UNSPECIFIED},
	{raftnode.ErrTransferFailed, codes.DeadlineExceeded, batonpb.Reason_REASON_UNSPECIFIED},
}

// classify maps err to its code, reason and the leader's client address
// (for NOT_LEADER).
func (s *Server) classify(err error) (codes.Code, batonpb.Reason, string) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Code(), batonpb.Reason_REASON_UNSPECIFIED, ""
	}
	for _, e := range errorMap {
		if errors.Is(err, e.err) {
			leader := ""
			if e.reason == batonpb.Reason_NOT_LEADER {
				leader = s.leaderAddr()
			}
			return e.code, e.reason, leader
		}
	}
	return codes.Internal, batonpb.Reason_REASON_UNSPECIFIED, ""
}

// toStatus turns err into a gRPC status error carrying ErrorInfo.
func (s *Server) toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	code, reason, leader := s.classify(err)
	msg := s.message(code, err)
	st := status.New(code, msg)
	if reason == batonpb.Reason_REASON_UNSPECIFIED {
		return st.Err()
	}
	info := &errdetails.ErrorInfo{Reason: reason.String(), Domain: ErrorDomain}
	if leader != "" {
		info.Metadata = map[string]string{"leader_addr": leader}
	}
	details := []protoadapt.MessageV1{info}
	if cycle := deadlockCycle(err); len(cycle) > 0 {
		details = append(details, &batonpb.DeadlockCycle{Edges: cycle})
	}
	if d, derr := st.WithDetails(details...); derr == nil {
		st = d
	}
	return st.Err()
}

// deadlockCycle is the cycle of a DEADLOCK refusal in the API's terms,
// nil for any other error.
func deadlockCycle(err error) []*batonpb.DeadlockEdge {
	var fe *fsm.Error
	if !errors.As(err, &fe) || len(fe.Deadlock) == 0 {
		return nil
	}
	return cycleToWire(fe.Deadlock)
}

// cycleToWire is a deadlock cycle in the API's terms.
func cycleToWire(edges []*fsmpb.DeadlockEdge) []*batonpb.DeadlockEdge {
	if len(edges) == 0 {
		return nil
	}
	out := make([]*batonpb.DeadlockEdge, len(edges))
	for i, e := range edges {
		out[i] = &batonpb.DeadlockEdge{SessionId: e.GetSessionId(), OwnerKey: e.GetOwnerKey(), Lock: e.GetLock(),
			QueuedAhead: e.GetQueuedAhead(), BlockerSessionId: e.GetBlockerSessionId(), BlockerOwnerKey: e.GetBlockerOwnerKey()}
	}
	return out
}

// toWire turns err into the Error of a stream response.
func (s *Server) toWire(err error) *batonpb.Error {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok {
		e := &batonpb.Error{Code: uint32(st.Code()), Message: st.Message()}
		for _, d := range st.Details() {
			switch d := d.(type) {
			case *errdetails.ErrorInfo:
				if d.GetDomain() == ErrorDomain {
					e.Reason = batonpb.Reason(batonpb.Reason_value[d.GetReason()])
					e.LeaderAddr = d.GetMetadata()["leader_addr"]
				}
			case *batonpb.DeadlockCycle:
				e.DeadlockCycle = d.GetEdges()
			}
		}
		return e
	}
	code, reason, leader := s.classify(err)
	msg := s.message(code, err)
	return &batonpb.Error{Code: uint32(code), Reason: reason, Message: msg, LeaderAddr: leader, DeadlockCycle: deadlockCycle(err)}
}

// message is what the caller reads: the state machine's own words without
// internal package prefixes; internal errors are logged, not shown.
func (s *Server) message(code codes.Code, err error) string {
	if code == codes.Internal {
		s.log.Error("internal error", "err", err)
		return "internal error"
	}
	var fe *fsm.Error
	if errors.As(err, &fe) && fe.Msg != "" {
		return fe.Msg
	}
	return err.Error()
}
