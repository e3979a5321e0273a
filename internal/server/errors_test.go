package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
	"github.com/batonlock/baton/internal/liveness"
	"github.com/batonlock/baton/internal/raftnode"
)

// TestReasonsMatch pins that reasonOfFSM's numeric cast is right: every
// fsm error maps to the wire Reason of the same name, but REFUSED, which
// has none (as the refusal before the log it repeats).
func TestReasonsMatch(t *testing.T) {
	if got := reasonOfFSM(fsmpb.Error_ERROR_REFUSED); got != batonpb.Reason_REASON_UNSPECIFIED {
		t.Errorf("fsm ERROR_REFUSED maps to %s, want no reason", got)
	}
	for v, name := range fsmpb.Error_name {
		if v == 0 || fsmpb.Error(v) == fsmpb.Error_ERROR_REFUSED {
			continue
		}
		want := name[len("ERROR_"):]
		if got := reasonOfFSM(fsmpb.Error(v)).String(); got != want {
			t.Errorf("fsm %s maps to %s, want %s", name, got, want)
		}
	}
}

// TestDeadlockCycleTravels: a DEADLOCK refusal's cycle reaches the
// client both ways: as the DeadlockCycle status detail of a unary call
// (and so the HTTP gateway's body), and in Error.deadlock_cycle on the
// Sessions stream, from either form of the error.
func TestDeadlockCycleTravels(t *testing.T) {
	s := New(Config{})
	err := fsm.ErrorOf(&fsmpb.Result{Error: fsmpb.Error_ERROR_DEADLOCK, Message: "deadlock: session 2 waits for lock \"x\" held by session 1, ...",
		Deadlock: &fsmpb.DeadlockCycle{Edges: []*fsmpb.DeadlockEdge{
			{SessionId: 2, Lock: "x", BlockerSessionId: 1},
			{SessionId: 1, OwnerKey: "k", Lock: "y", QueuedAhead: true, BlockerSessionId: 2},
		}}})
	want := []*batonpb.DeadlockEdge{
		{SessionId: 2, Lock: "x", BlockerSessionId: 1},
		{SessionId: 1, OwnerKey: "k", Lock: "y", QueuedAhead: true, BlockerSessionId: 2},
	}
	st, _ := status.FromError(s.toStatus(err))
	if st.Code() != codes.Aborted {
		t.Fatalf("code %v, want Aborted", st.Code())
	}
	var got []*batonpb.DeadlockEdge
	for _, d := range st.Details() {
		if c, ok := d.(*batonpb.DeadlockCycle); ok {
			got = c.GetEdges()
		}
	}
	if !equalEdges(got, want) {
		t.Fatalf("status detail %v, want %v", got, want)
	}
	for _, e := range []error{err, s.toStatus(err)} {
		w := s.toWire(e)
		if w.GetReason() != batonpb.Reason_DEADLOCK || !equalEdges(w.GetDeadlockCycle(), want) {
			t.Fatalf("toWire(%v) = %v, want DEADLOCK with %v", e, w, want)
		}
	}
	if w := s.toWire(fsm.ErrorOf(&fsmpb.Result{Error: fsmpb.Error_ERROR_NOT_HOLDER})); len(w.GetDeadlockCycle()) != 0 {
		t.Fatalf("a NOT_HOLDER error carries a cycle: %v", w)
	}
}

func equalEdges(a, b []*batonpb.DeadlockEdge) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func TestErrorMapping(t *testing.T) {
	s := New(Config{})
	tests := []struct {
		err    error
		code   codes.Code
		reason batonpb.Reason
	}{
		{invalidf("name: empty"), codes.InvalidArgument, batonpb.Reason_INVALID_ARGUMENT},
		{fsm.ErrorOf(&fsmpb.Result{Error: fsmpb.Error_ERROR_NOT_HOLDER, Message: "x"}), codes.FailedPrecondition, batonpb.Reason_NOT_HOLDER},
		{fsm.ErrorOf(&fsmpb.Result{Error: fsmpb.Error_ERROR_SESSION_NOT_FOUND}), codes.NotFound, batonpb.Reason_SESSION_NOT_FOUND},
		{fsm.ErrorOf(&fsmpb.Result{Error: fsmpb.Error_ERROR_TOO_MANY_WAITERS}), codes.ResourceExhausted, batonpb.Reason_TOO_MANY_WAITERS},
		{fsm.ErrorOf(&fsmpb.Result{Error: fsmpb.Error_ERROR_DEADLOCK}), codes.Aborted, batonpb.Reason_DEADLOCK},
		{fmt.Errorf("wrapped: %w", &raftnode.NotLeaderError{Leader: 7}), codes.Unavailable, batonpb.Reason_NOT_LEADER},
		{raftnode.ErrOutcomeUnknown, codes.Unavailable, batonpb.Reason_OUTCOME_UNKNOWN},
		{raftnode.ErrOverloaded, codes.ResourceExhausted, batonpb.Reason_OVERLOADED},
		{fmt.Errorf("%w: 5 live", errTooManySessions), codes.ResourceExhausted, batonpb.Reason_TOO_MANY_SESSIONS},
		{fmt.Errorf("%w: session 5", errKeepAliveRate), codes.ResourceExhausted, batonpb.Reason_OVERLOADED},
		{fmt.Errorf("%w: 1 MiB free", errNoSpace), codes.ResourceExhausted, batonpb.Reason_NO_SPACE},
		{liveness.ErrSessionLost, codes.NotFound, batonpb.Reason_SESSION_EXPIRED},
		{context.DeadlineExceeded, codes.DeadlineExceeded, batonpb.Reason_REASON_UNSPECIFIED},
		{errors.New("boom"), codes.Internal, batonpb.Reason_REASON_UNSPECIFIED},
	}
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			st, _ := status.FromError(s.toStatus(tt.err))
			if st.Code() != tt.code {
				t.Fatalf("code %v, want %v", st.Code(), tt.code)
			}
			var reason string
			for _, d := range st.Details() {
				if info, ok := d.(*errdetails.ErrorInfo); ok {
					reason = info.GetReason()
				}
			}
			want := tt.reason.String()
			if tt.reason == batonpb.Reason_REASON_UNSPECIFIED {
				want = ""
			}
			if reason != want {
				t.Fatalf("reason %q, want %q", reason, want)
			}
			if w := s.toWire(tt.err); codes.Code(w.GetCode()) != tt.code {
				t.Fatalf("wire code %v, want %v", w.GetCode(), tt.code)
			}
		})
	}
}

func TestRequestValidation(t *testing.T) {
	h := &batonpb.RequestHeader{SessionId: 1, Seq: 1}
	long := string(make([]byte, rules.MaxNameLen+1))
	tests := []struct {
		name string
		req  *batonpb.AcquireRequest
	}{
		{"no header", &batonpb.AcquireRequest{Name: "x"}},
		{"no session", &batonpb.AcquireRequest{Header: &batonpb.RequestHeader{Seq: 1}, Name: "x"}},
		{"seq zero", &batonpb.AcquireRequest{Header: &batonpb.RequestHeader{SessionId: 1}, Name: "x"}},
		{"min unacked above seq", &batonpb.AcquireRequest{Header: &batonpb.RequestHeader{SessionId: 1, Seq: 1, MinUnackedSeq: 2}, Name: "x"}},
		{"empty name", &batonpb.AcquireRequest{Header: h}},
		{"long name", &batonpb.AcquireRequest{Header: h, Name: long}},
		{"bad utf8", &batonpb.AcquireRequest{Header: h, Name: "\xff"}},
		{"timeout without wait", &batonpb.AcquireRequest{Header: h, Name: "x", WaitTimeout: durationOf(1)}},
		{"negative timeout", &batonpb.AcquireRequest{Header: h, Name: "x", Wait: true, WaitTimeout: durationOf(-1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := acquireCommand(tt.req); !errors.Is(err, errInvalid) {
				t.Fatalf("got %v, want invalid argument", err)
			}
		})
	}
	if _, _, err := openCommand(&batonpb.OpenSessionRequest{Ttl: durationOf(int64(rules.MaxTTL) + 1)}); !errors.Is(err, errInvalid) {
		t.Fatalf("ttl above max: %v", err)
	}
	if _, err := acquireManyCommand(&batonpb.AcquireManyRequest{Header: h, Names: []string{"a", "a"}}); !errors.Is(err, errInvalid) {
		t.Fatalf("duplicate names: %v", err)
	}
	for _, bad := range []struct {
		req  *batonpb.AcquireManyRequest
		want string
	}{
		{&batonpb.AcquireManyRequest{Header: h, Names: []string{"a", "b"}, Modes: []*batonpb.LockMode{{}}}, "modes: acquire_many gives 1 modes for 2 locks"},
		{&batonpb.AcquireManyRequest{Header: h, Names: []string{"a"}, Shared: true, Modes: []*batonpb.LockMode{{Shared: true}}}, "leave shared and limit unset"},
		{&batonpb.AcquireManyRequest{Header: h, Names: []string{"a", "pool"}, Modes: []*batonpb.LockMode{{}, {Shared: true, Limit: rules.MaxHoldersPerLock + 1}}},
			`modes[1] (lock "pool"): holder limit 10001 is over the maximum`},
	} {
		if _, err := acquireManyCommand(bad.req); !errors.Is(err, errInvalid) || !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("%v: got %v, want invalid argument saying %q", bad.req, err, bad.want)
		}
	}
	mixed, err := acquireManyCommand(&batonpb.AcquireManyRequest{Header: h, Names: []string{"m", "pool"}, All: true,
		Modes: []*batonpb.LockMode{{}, {Shared: true, Limit: 3}}})
	if err != nil || !proto.Equal(mixed.GetAcquireMany(), &fsmpb.AcquireMany{Locks: []string{"m", "pool"}, All: true,
		Modes: []*fsmpb.LockMode{{}, {Shared: true, Limit: 3}}}) {
		t.Fatalf("a mixed set: %v, %v", mixed, err)
	}
	if _, err := releaseCommand(&batonpb.ReleaseRequest{Header: h, Name: "a"}); !errors.Is(err, errInvalid) {
		t.Fatalf("release without token: %v", err)
	}
}

// TestAuthChangeValidation: a change of users, roles or permissions
// whose names or prefix break a rule is refused before it is proposed,
// in the rule's words, as the state machine would refuse it applied
// (FuzzRequestCommands found them proposed: a log entry on every member
// for a refusal).
func TestAuthChangeValidation(t *testing.T) {
	long := strings.Repeat("u", rules.MaxAuthNameLen+1)
	tests := []struct {
		name string
		req  *batonpb.ChangeAuthRequest
		want string // in the refusal; "" accepted
	}{
		{"add user", &batonpb.ChangeAuthRequest{Kind: batonpb.ChangeAuthRequest_ADD_USER, User: "alice"}, ""},
		{"no user", &batonpb.ChangeAuthRequest{Kind: batonpb.ChangeAuthRequest_ADD_USER}, "user is required"},
		{"user with a control character", &batonpb.ChangeAuthRequest{Kind: batonpb.ChangeAuthRequest_ADD_USER, User: "000\x010"}, "user name"},
		{"long user", &batonpb.ChangeAuthRequest{Kind: batonpb.ChangeAuthRequest_DELETE_USER, User: long}, "user name is 129 bytes"},
		{"role with a newline", &batonpb.ChangeAuthRequest{Kind: batonpb.ChangeAuthRequest_GRANT_ROLE, User: "alice", Role: "a\nb"}, "role name"},
		{"long role", &batonpb.ChangeAuthRequest{Kind: batonpb.ChangeAuthRequest_ADD_ROLE, Role: long}, "role name is 129 bytes"},
		{"grant over every name", &batonpb.ChangeAuthRequest{Kind: batonpb.ChangeAuthRequest_GRANT, Role: "ops", Perms: "all"}, ""},
		{"grant over a control character", &batonpb.ChangeAuthRequest{Kind: batonpb.ChangeAuthRequest_GRANT, Role: "ops", Prefix: "jobs/\x00", Perms: "read"}, "prefix: lock name"},
		{"revoke over a long prefix", &batonpb.ChangeAuthRequest{Kind: batonpb.ChangeAuthRequest_REVOKE, Role: "ops", Prefix: strings.Repeat("p", rules.MaxNameLen+1)}, "prefix: lock name is 513 bytes"},
		{"no perms", &batonpb.ChangeAuthRequest{Kind: batonpb.ChangeAuthRequest_GRANT, Role: "ops", Prefix: "jobs/"}, "perms"},
		{"no kind", &batonpb.ChangeAuthRequest{User: "alice"}, "not an auth change"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := authChangeCommand(tt.req)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (!errors.Is(err, errInvalid) || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v, want invalid argument saying %q", err, tt.want)
			}
		})
	}
}

func durationOf(nanos int64) *durationpb.Duration { return durationpb.New(time.Duration(nanos)) }
