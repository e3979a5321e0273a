package server

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/api/wire"
	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// requestKind is one request message the API decodes and the check it
// goes through before anything is proposed.
type requestKind struct {
	new func() proto.Message
	// commands runs the request through the API's checks and returns the
	// commands it would propose (none for a renewal, which is not
	// logged), or the refusal.
	commands func(m proto.Message) ([]*fsmpb.Command, error)
}

func one(cmd *fsmpb.Command, err error) ([]*fsmpb.Command, error) {
	if err != nil {
		return nil, err
	}
	return []*fsmpb.Command{cmd}, nil
}

// sessionRequestCommands is what the Sessions stream makes of one
// request (channel.go, sessions.go): keepalives and resumes make no command.
func sessionRequestCommands(r *batonpb.SessionRequest) ([]*fsmpb.Command, error) {
	switch k := r.GetKind().(type) {
	case *batonpb.SessionRequest_Open:
		cmd, _, err := openCommand(k.Open)
		return one(cmd, err)
	case *batonpb.SessionRequest_Acquire:
		return one(acquireCommand(k.Acquire))
	case *batonpb.SessionRequest_AcquireMany:
		return one(acquireManyCommand(k.AcquireMany))
	case *batonpb.SessionRequest_Release:
		return one(releaseCommand(k.Release))
	case *batonpb.SessionRequest_Proclaim:
		return one(proclaimCommand(k.Proclaim))
	case *batonpb.SessionRequest_Cancel:
		return one(cancelCommand(k.Cancel))
	case *batonpb.SessionRequest_Close:
		return one(closeCommand(1, k.Close.GetSeq())) // the stream's session
	case *batonpb.SessionRequest_RenewHold:
		return nil, checkRenewHold(k.RenewHold)
	}
	return nil, nil
}

// requestKinds are the requests that make commands (and renewals, checked
// alike), as gRPC's unary calls and the HTTP gateway receive them, and
// the Sessions stream's requests.
var requestKinds = map[string]requestKind{
	"OpenSession": {func() proto.Message { return &batonpb.OpenSessionRequest{} }, func(m proto.Message) ([]*fsmpb.Command, error) {
		cmd, _, err := openCommand(m.(*batonpb.OpenSessionRequest))
		return one(cmd, err)
	}},
	"Acquire": {func() proto.Message { return &batonpb.AcquireRequest{} }, func(m proto.Message) ([]*fsmpb.Command, error) {
		return one(acquireCommand(m.(*batonpb.AcquireRequest)))
	}},
	"AcquireMany": {func() proto.Message { return &batonpb.AcquireManyRequest{} }, func(m proto.Message) ([]*fsmpb.Command, error) {
		return one(acquireManyCommand(m.(*batonpb.AcquireManyRequest)))
	}},
	"Release": {func() proto.Message { return &batonpb.ReleaseRequest{} }, func(m proto.Message) ([]*fsmpb.Command, error) {
		return one(releaseCommand(m.(*batonpb.ReleaseRequest)))
	}},
	"Proclaim": {func() proto.Message { return &batonpb.ProclaimRequest{} }, func(m proto.Message) ([]*fsmpb.Command, error) {
		return one(proclaimCommand(m.(*batonpb.ProclaimRequest)))
	}},
	"Cancel": {func() proto.Message { return &batonpb.CancelRequest{} }, func(m proto.Message) ([]*fsmpb.Command, error) {
		return one(cancelCommand(m.(*batonpb.CancelRequest)))
	}},
	"CloseSession": {func() proto.Message { return &batonpb.CloseSessionRequest{} }, func(m proto.Message) ([]*fsmpb.Command, error) {
		r := m.(*batonpb.CloseSessionRequest)
		return one(closeCommand(r.GetSessionId(), r.GetSeq()))
	}},
	"RenewHold": {func() proto.Message { return &batonpb.RenewHoldRequest{} }, func(m proto.Message) ([]*fsmpb.Command, error) {
		return nil, checkRenewHold(m.(*batonpb.RenewHoldRequest))
	}},
	"CasRelease": {func() proto.Message { return &batonpb.CasReleaseRequest{} }, func(m proto.Message) ([]*fsmpb.Command, error) {
		return one(casReleaseCommand(m.(*batonpb.CasReleaseRequest)))
	}},
	"Revoke": {func() proto.Message { return &batonpb.RevokeRequest{} }, func(m proto.Message) ([]*fsmpb.Command, error) {
		return one(revokeCommand(m.(*batonpb.RevokeRequest)))
	}},
	"Blacklist": {func() proto.Message { return &batonpb.BlacklistRequest{} }, func(m proto.Message) ([]*fsmpb.Command, error) {
		return one(blacklistCommand(m.(*batonpb.BlacklistRequest)))
	}},
	"ChangeAuth": {func() proto.Message { return &batonpb.ChangeAuthRequest{} }, func(m proto.Message) ([]*fsmpb.Command, error) {
		cmd, _, err := authChangeCommand(m.(*batonpb.ChangeAuthRequest))
		return one(cmd, err)
	}},
	"Session": {func() proto.Message { return &batonpb.SessionRequest{} }, func(m proto.Message) ([]*fsmpb.Command, error) {
		return sessionRequestCommands(m.(*batonpb.SessionRequest))
	}},
}

// FuzzRequestCommands decodes arbitrary bytes as every request that makes
// a log command, as gRPC does (proto; a Sessions stream's batch with
// package wire's decoder) and as the HTTP gateway does (JSON with its
// options), and runs what decodes through the API's checks (openCommand,
// acquireCommand, ...). The checks must not panic, and refuse with
// errInvalid only. What they accept, the log must take as the API's
// (checkAccepted): every rule of what a request may contain is the API's
// to enforce before proposing, since a command the state machine refuses
// for its contents has cost every member a log entry.
func FuzzRequestCommands(f *testing.F) {
	for _, seed := range requestSeeds(f) {
		f.Add(seed)
	}
	gateway := gatewayJSON()
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(name, how string, m proto.Message) {
			cmds, err := requestKinds[name].commands(m)
			if err != nil {
				if !errors.Is(err, errInvalid) {
					t.Fatalf("%s (%s) %v: refused with %v, not as invalid", name, how, m, err)
				}
				return
			}
			for _, cmd := range cmds {
				checkAccepted(t, name+" ("+how+")", cmd)
			}
		}
		for name, k := range requestKinds {
			if m := k.new(); proto.Unmarshal(data, m) == nil {
				check(name, "proto", m)
			}
			if m := k.new(); gateway.NewDecoder(bytes.NewReader(data)).Decode(m) == nil {
				check(name, "JSON", m)
			}
		}
		var batch batonpb.SessionsRequest
		if wire.UnmarshalSessionsRequest(data, &batch) == nil {
			for _, r := range batch.GetRequests() {
				check("Session", "stream batch", r.GetRequest())
			}
		}
	})
}

// checkAccepted checks cmd, which the API accepted from the request
// what: it encodes and decodes as raftnode writes and reads log entries,
// needs no log version above this release's, and a state machine where
// the session, lock holder, user and role it names exist never refuses it
// INVALID_ARGUMENT. (The session is put in its place: the API does not
// know which sessions live.)
func checkAccepted(t *testing.T, what string, cmd *fsmpb.Command) {
	t.Helper()
	data, ok := fsm.EncodeCommand(cmd)
	if !ok {
		var err error
		if data, err = proto.Marshal(cmd); err != nil {
			t.Fatalf("%s: the command %v does not encode: %v", what, cmd, err)
		}
	}
	got, ok := fsm.DecodeCommand(data)
	if !ok {
		got = &fsmpb.Command{}
		if err := proto.Unmarshal(data, got); err != nil {
			t.Fatalf("%s: the command %v does not decode: %v", what, cmd, err)
		}
	}
	if !proto.Equal(got, cmd) {
		t.Fatalf("%s: the command %v decodes as %v", what, cmd, got)
	}
	if v := fsm.VersionNeeded(got); v > fsm.LogVersion {
		t.Fatalf("%s: the command %v needs log version %d, above this release's %d", what, got, v, fsm.LogVersion)
	}

	m := fsm.New()
	index := uint64(0)
	apply := func(cmd *fsmpb.Command) *fsmpb.Result {
		index++
		return m.Apply(index, cmd)
	}
	open := func() uint64 {
		return apply(&fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{}}}).GetSessionId()
	}
	if got.GetSessionId() != 0 {
		got.SessionId = open()
	}
	skip := false
	switch op := got.GetOp().(type) {
	case *fsmpb.Command_CancelWait:
		op.CancelWait.SessionId = got.GetSessionId()
	case *fsmpb.Command_BlacklistSession:
		op.BlacklistSession.SessionId = open()
	case *fsmpb.Command_CasRelease:
		op.CasRelease.SessionId = open()
	case *fsmpb.Command_AuthChange:
		skip = prepareAuth(t, what, apply, op.AuthChange)
	}
	res := apply(got)
	if res.GetError() == fsmpb.Error_ERROR_INVALID_ARGUMENT && !skip {
		t.Fatalf("%s: the API accepted %v; the state machine refuses it as invalid: %s", what, cmd, res.GetMessage())
	}
}

// prepareAuth makes the users, roles and permission that the auth change
// op names, so that the state machine refuses it only for what it
// contains. It reports true for a change of the built-in role root, which
// the state machine refuses whatever the request (its state is that
// root exists and never changes); the API leaves that to it.
func prepareAuth(t *testing.T, what string, apply func(*fsmpb.Command) *fsmpb.Result, op *fsmpb.AuthChange) bool {
	t.Helper()
	change := func(c *fsmpb.AuthChange) {
		t.Helper()
		if res := apply(&fsmpb.Command{Op: &fsmpb.Command_AuthChange{AuthChange: c}}); res.GetError() != fsmpb.Error_ERROR_NONE {
			t.Fatalf("%s: the API accepted %v; preparing for it, %v is refused: %s", what, op, c, res.GetMessage())
		}
	}
	user, role := op.GetUser(), op.GetRole()
	switch op.GetKind() {
	case fsmpb.AuthChange_ADD_ROLE, fsmpb.AuthChange_DELETE_ROLE, fsmpb.AuthChange_GRANT, fsmpb.AuthChange_REVOKE:
		if role == fsm.RootRole {
			return true
		}
	}
	switch op.GetKind() {
	case fsmpb.AuthChange_DELETE_USER, fsmpb.AuthChange_GRANT_ROLE, fsmpb.AuthChange_REVOKE_ROLE:
		change(&fsmpb.AuthChange{Kind: fsmpb.AuthChange_ADD_USER, User: user})
	case fsmpb.AuthChange_ENABLE:
		change(&fsmpb.AuthChange{Kind: fsmpb.AuthChange_ADD_USER, User: "fuzz-root"})
		change(&fsmpb.AuthChange{Kind: fsmpb.AuthChange_GRANT_ROLE, User: "fuzz-root", Role: fsm.RootRole})
	}
	switch op.GetKind() {
	case fsmpb.AuthChange_GRANT_ROLE, fsmpb.AuthChange_REVOKE_ROLE, fsmpb.AuthChange_DELETE_ROLE, fsmpb.AuthChange_GRANT, fsmpb.AuthChange_REVOKE:
		if role != fsm.RootRole {
			change(&fsmpb.AuthChange{Kind: fsmpb.AuthChange_ADD_ROLE, Role: role})
		}
	}
	switch op.GetKind() {
	case fsmpb.AuthChange_REVOKE_ROLE:
		change(&fsmpb.AuthChange{Kind: fsmpb.AuthChange_GRANT_ROLE, User: user, Role: role})
	case fsmpb.AuthChange_REVOKE:
		change(&fsmpb.AuthChange{Kind: fsmpb.AuthChange_GRANT, Role: role, Prefix: op.GetPrefix(), Perms: uint32(fsm.PermRead)})
	}
	return false
}

// requestSeeds are requests as the Go client, the CLI and curl send
// them: each in proto and in JSON, and a Sessions stream batch.
func requestSeeds(tb testing.TB) [][]byte {
	h := &batonpb.RequestHeader{SessionId: 7, Seq: 3, MinUnackedSeq: 2, Secret: "0123456789abcdefghijklmnopqrstuv"}
	reqs := []proto.Message{
		&batonpb.OpenSessionRequest{Ttl: durationpb.New(15 * time.Second), Owner: "host-1/4242", Nonce: 99, Secret: "0123456789abcdefghijklmnopqrstuv"},
		&batonpb.OpenSessionRequest{},
		&batonpb.AcquireRequest{Header: h, Name: "jobs/nightly", OwnerKey: "worker", Wait: true, WaitTimeout: durationpb.New(time.Minute)},
		&batonpb.AcquireRequest{Header: h, Name: "pool/encoders", Limit: 4, Shared: true, HoldLimit: durationpb.New(time.Hour)},
		&batonpb.AcquireManyRequest{Header: h, Names: []string{"a", "b", "c"}, All: true, HoldLimit: durationpb.New(30 * time.Second)},
		&batonpb.AcquireRequest{Header: h, Name: "files/report", LockDelay: durationpb.New(15 * time.Second)},
		&batonpb.AcquireManyRequest{Header: h, Names: []string{"a", "b"}, LockDelay: durationpb.New(0)},
		&batonpb.AcquireManyRequest{Header: h, Names: []string{"jobs/a", "config/site", "pool/encoders"}, All: true,
			Modes: []*batonpb.LockMode{{}, {Shared: true, Limit: 8}, {Shared: true, Limit: 4}}},
		&batonpb.ReleaseRequest{Header: h, Name: "jobs/nightly", Token: 42, OwnerKey: "worker"},
		&batonpb.CancelRequest{Header: h, Name: "jobs/nightly", AcquireSeq: 3},
		&batonpb.AcquireRequest{Header: h, Name: "leader/jobs", Wait: true, Value: "10.0.0.7:8080"},
		&batonpb.ProclaimRequest{Header: h, Name: "leader/jobs", Token: 42, Value: "10.0.0.7:8081"},
		&batonpb.SessionRequest{Id: 5, Kind: &batonpb.SessionRequest_Proclaim{Proclaim: &batonpb.ProclaimRequest{Header: h, Name: "leader/jobs", Token: 42, Value: "v"}}},
		&batonpb.CloseSessionRequest{SessionId: 7, Seq: 4},
		&batonpb.RenewHoldRequest{SessionId: 7, Name: "jobs/nightly", Token: 42},
		&batonpb.CasReleaseRequest{Name: "jobs/nightly", SessionId: 7, Token: 42},
		&batonpb.BlacklistRequest{SessionId: 7},
		&batonpb.RevokeRequest{Name: "jobs/nightly", Token: 42, Grace: durationpb.New(30 * time.Second)},
		&batonpb.RevokeRequest{Name: "jobs/nightly"},
		&batonpb.RevokeRequest{Name: "jobs/nightly", Grace: durationpb.New(rules.MaxRevokeGrace)},
		&batonpb.ChangeAuthRequest{Kind: batonpb.ChangeAuthRequest_ADD_USER, User: "alice", WithToken: true},
		&batonpb.ChangeAuthRequest{Kind: batonpb.ChangeAuthRequest_GRANT, Role: "jobs", Prefix: "jobs/", Perms: "lock,read"},
		&batonpb.ChangeAuthRequest{Kind: batonpb.ChangeAuthRequest_REVOKE_ROLE, User: "alice", Role: "jobs"},
		&batonpb.ChangeAuthRequest{Kind: batonpb.ChangeAuthRequest_ENABLE},
		&batonpb.SessionRequest{Id: 2, Kind: &batonpb.SessionRequest_Acquire{Acquire: &batonpb.AcquireRequest{Header: h, Name: "x", Wait: true}}},
		// At the limits, a byte or a nanosecond from a refusal.
		&batonpb.OpenSessionRequest{Ttl: durationpb.New(rules.MaxTTL), Owner: strings.Repeat("o", rules.MaxOwnerLen), Secret: strings.Repeat("s", rules.MaxSecretLen)},
		&batonpb.AcquireRequest{Header: h, Name: strings.Repeat("n", rules.MaxNameLen), OwnerKey: strings.Repeat("k", rules.MaxOwnerLen), Limit: rules.MaxHoldersPerLock,
			HoldLimit: durationpb.New(rules.MaxHoldLimit), Wait: true, WaitTimeout: durationpb.New(rules.MaxWaitTimeout), LockDelay: durationpb.New(rules.MaxLockDelay)},
		&batonpb.ChangeAuthRequest{Kind: batonpb.ChangeAuthRequest_GRANT_ROLE, User: strings.Repeat("u", rules.MaxAuthNameLen), Role: strings.Repeat("r", rules.MaxAuthNameLen)},
		&batonpb.ProclaimRequest{Header: h, Name: "e", Token: 1, Value: strings.Repeat("v", rules.MaxHoldValueLen)},
	}
	var out [][]byte
	json := protojson.MarshalOptions{UseProtoNames: true} // as curl users write it
	for _, r := range reqs {
		b, err := proto.Marshal(r)
		if err != nil {
			tb.Fatal(err)
		}
		j, err := json.Marshal(r)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b, j)
	}
	batch, err := wire.MarshalSessionsRequest(nil, &batonpb.SessionsRequest{Requests: []*batonpb.ChannelRequest{
		{Channel: 1, Request: &batonpb.SessionRequest{Id: 1, Kind: &batonpb.SessionRequest_Open{Open: &batonpb.OpenSessionRequest{Ttl: durationpb.New(10 * time.Second), Nonce: 5}}}},
		{Channel: 2, Request: &batonpb.SessionRequest{Id: 3, Kind: &batonpb.SessionRequest_Release{Release: &batonpb.ReleaseRequest{Header: &batonpb.RequestHeader{SessionId: 7, Seq: 9}, Name: "x", Token: 5}}}},
		{Channel: 2, Request: &batonpb.SessionRequest{Id: 4, Kind: &batonpb.SessionRequest_Close{Close: &batonpb.CloseSessionRequest{Seq: 10}}}},
	}})
	if err != nil {
		tb.Fatal(err)
	}
	return append(out, batch)
}
