package fsm

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

func TestValidateLockName(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		wantErr string // substring; "" means valid
	}{
		{"simple", "jobs/42", ""},
		{"unicode", "verrou/été/🔒", ""},
		{"max length", strings.Repeat("a", rules.MaxNameLen), ""},
		{"empty", "", "lock name is empty"},
		{"too long", strings.Repeat("a", 600), "lock name is 600 bytes; the limit is 512"},
		{"bad utf8", "a\xffb", "not valid UTF-8"},
		{"nul", "a\x00b", "control character U+0000 at byte 1"},
		{"newline", "a\nb", "control character U+000A"},
		{"del", "a\x7f", "control character U+007F"},
		{"c1 control", "a\u0085", "control character U+0085"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkValidation(t, ValidateLockName(tt.input), tt.wantErr)
		})
	}
}

func TestValidateOwner(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		wantErr string
	}{
		{"empty", "", ""},
		{"label", "host-1/4242/indexer", ""},
		{"max length", strings.Repeat("o", rules.MaxOwnerLen), ""},
		{"too long", strings.Repeat("o", rules.MaxOwnerLen+1), "owner is 257 bytes; the limit is 256"},
		{"bad utf8", "\xc3", "not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkValidation(t, ValidateOwner(tt.input), tt.wantErr)
		})
	}
}

func TestValidateTTL(t *testing.T) {
	tests := []struct {
		name    string
		input   time.Duration
		wantErr string
	}{
		{"min", rules.MinTTL, ""},
		{"default", rules.DefaultTTL, ""},
		{"max", rules.MaxTTL, ""},
		{"zero", 0, "ttl 0s is outside 1s..10m0s"},
		{"below", rules.MinTTL - 1, "outside"},
		{"above", rules.MaxTTL + 1, "outside"},
		{"negative", -time.Second, "outside"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkValidation(t, ValidateTTL(int64(tt.input)), tt.wantErr)
		})
	}
}

func checkValidation(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("got %v, want nil", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("got nil, want an error containing %q", want)
	}
	if !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("%v does not match ErrInvalidArgument", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("got %q, want it to contain %q", err, want)
	}
}

func TestErrorOf(t *testing.T) {
	sentinels := map[fsmpb.Error]error{
		fsmpb.Error_ERROR_INVALID_ARGUMENT:  ErrInvalidArgument,
		fsmpb.Error_ERROR_SESSION_NOT_FOUND: ErrSessionNotFound,
		fsmpb.Error_ERROR_LOCK_NOT_FOUND:    ErrLockNotFound,
		fsmpb.Error_ERROR_NOT_HOLDER:        ErrNotHolder,
		fsmpb.Error_ERROR_TOKEN_MISMATCH:    ErrTokenMismatch,
		fsmpb.Error_ERROR_BLACKLISTED:       ErrBlacklisted,
		fsmpb.Error_ERROR_TOO_MANY_WAITERS:  ErrTooManyWaiters,
		fsmpb.Error_ERROR_TOO_MANY_PENDING:  ErrTooManyPending,
		fsmpb.Error_ERROR_STALE_SEQUENCE:    ErrStaleSequence,
		fsmpb.Error_ERROR_NOT_WAITING:       ErrNotWaiting,
		fsmpb.Error_ERROR_WAIT_CANCELLED:    ErrWaitCancelled,
		fsmpb.Error_ERROR_WAIT_TIMED_OUT:    ErrWaitTimedOut,
		fsmpb.Error_ERROR_TOO_MANY_HOLDS:    ErrTooManyHolds,
		fsmpb.Error_ERROR_LIMIT_MISMATCH:    ErrLimitMismatch,
		fsmpb.Error_ERROR_SECRET_MISMATCH:   ErrSecretMismatch,
		fsmpb.Error_ERROR_NOT_PERMITTED:     ErrPermissionDenied,
		fsmpb.Error_ERROR_DEADLOCK:          ErrDeadlock,
		fsmpb.Error_ERROR_REFUSED:           ErrRefused,
	}
	if len(sentinels) != len(fsmpb.Error_name)-1 {
		t.Fatalf("%d sentinels for %d error codes", len(sentinels), len(fsmpb.Error_name)-1)
	}
	for code, want := range sentinels {
		t.Run(code.String(), func(t *testing.T) {
			err := ErrorOf(&fsmpb.Result{Error: code, Message: "why"})
			if !errors.Is(err, want) {
				t.Fatalf("%v does not match %v", err, want)
			}
			for other, s := range sentinels {
				if other != code && errors.Is(err, s) {
					t.Fatalf("%v also matches %v", err, s)
				}
			}
			if e, ok := errors.AsType[*Error](err); !ok || e.Msg != "why" || err.Error() != "fsm: why" {
				t.Fatalf("got %#v", err)
			}
		})
	}
	if ErrorOf(nil) != nil || ErrorOf(&fsmpb.Result{}) != nil {
		t.Fatal("success is not an error")
	}
}

// TestNumSessionsOf: each user's live sessions are counted as they open
// and end (a retried open is no new session, a blacklisted one still
// lives), sessions opened with authentication off are no one's, and a
// restored machine counts the same.
func TestNumSessionsOf(t *testing.T) {
	m := New()
	index := uint64(0)
	apply := func(cmd *fsmpb.Command) *fsmpb.Result {
		t.Helper()
		index++
		res := m.Apply(index, cmd)
		if err := ErrorOf(res); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
		return res
	}
	open := func(principal string, nonce uint64) uint64 {
		return apply(&fsmpb.Command{Principal: principal, Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{Nonce: nonce}}}).GetSessionId()
	}
	want := func(what string, counts map[string]int) {
		t.Helper()
		for p, n := range counts {
			if got := m.NumSessionsOf(p); got != n {
				t.Fatalf("%s: NumSessionsOf(%q) = %d, want %d", what, p, got, n)
			}
		}
		if err := checkIndexes(m); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	a1, a2 := open("alice", 1), open("alice", 2)
	b := open("bob", 0)
	open("", 0)
	want("opened", map[string]int{"alice": 2, "bob": 1, "": 0, "carol": 0})
	if id := open("alice", 1); id != a1 {
		t.Fatalf("a retried open made session %d, not %d", id, a1)
	}
	apply(&fsmpb.Command{Op: &fsmpb.Command_BlacklistSession{BlacklistSession: &fsmpb.BlacklistSession{SessionId: a2}}})
	want("a retry and a blacklisting", map[string]int{"alice": 2, "bob": 1})
	apply(&fsmpb.Command{Principal: "alice", SessionId: a1, Op: &fsmpb.Command_CloseSession{CloseSession: &fsmpb.CloseSession{}}})
	apply(&fsmpb.Command{Op: &fsmpb.Command_ExpireSession{ExpireSession: &fsmpb.ExpireSession{SessionId: b}}})
	want("a close and an expiry", map[string]int{"alice": 1, "bob": 0})

	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	m = New()
	if err := m.Restore(snap); err != nil {
		t.Fatal(err)
	}
	want("restored", map[string]int{"alice": 1, "bob": 0, "": 0})
}
