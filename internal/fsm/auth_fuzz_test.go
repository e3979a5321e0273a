package fsm

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// The small worlds FuzzAuthDecisions draws from: few enough names that
// random steps meet each other's users, roles, prefixes and locks.
var (
	fuzzPrincipals = []string{"", "root", "alice", "bob", "mallory"}
	fuzzRoles      = []string{RootRole, "jobs", "ops", ""}
	fuzzNames      = []string{"", "a", "a/", "a/1", "a/b/2", "b", "ab", "b/a"}
)

// Indexes into the worlds, for the seeds.
const (
	pNone, pRoot, pAlice, pBob, pMallory = 0, 1, 2, 3, 4
	rRoot, rJobs, rOps                   = 0, 1, 2
	nEvery, nA, nASlash, nA1, nAB2, nB   = 0, 1, 2, 3, 4, 5
)

// authStep is one step of FuzzAuthDecisions, authStepLen bytes of its
// input: which command (op), by whom (who: a principal), and its
// arguments, each an index into a world or a small number.
type authStep struct {
	op, who, user, role, name, perms, sess, extra byte
}

const authStepLen = 8

// The steps' operations.
const (
	stepAuthChange byte = iota // kind: extra&0xf; user, role, name (prefix), perms; token extra>>5 if extra&0x10
	stepOpen
	stepAcquire      // sess, name; waits if extra&1, a lock-delay if extra&2
	stepAcquireMany  // sess, name and the next name
	stepRelease      // sess, name; the hold's token
	stepClose        // sess
	stepCasRelease   // name, sess (the holder's); its token
	stepBlacklist    // sess
	stepCancelWait   // sess, name: the session cancels its wait
	stepTimeout      // sess, name: the leader's CancelWait, with no session
	stepExpire       // sess: the leader's ExpireSession
	stepExpireHold   // sess, name: the leader's ExpireHold
	stepRestore      // go on with the machine restored from a snapshot
	stepEndLockDelay // name: the leader's EndLockDelay of its running delay
	stepRotateKey    // a seed of extra; the leader's first key if extra&1, a retention of extra&6 hours
	numSteps
)

func encodeSteps(steps ...authStep) []byte {
	var b []byte
	for _, s := range steps {
		b = append(b, s.op, s.who, s.user, s.role, s.name, s.perms, s.sess, s.extra)
	}
	return b
}

func change(who byte, kind fsmpb.AuthChange_Kind, user, role, name, perms byte) authStep {
	return authStep{op: stepAuthChange, who: who, user: user, role: role, name: name, perms: perms, extra: byte(kind)}
}

// FuzzAuthDecisions applies a random series of auth changes and session
// commands, each by a random principal, and holds every decision of the
// state machine to a reference: whether the command's principal may make
// it, worked out independently (refAllowed) from the AuthState the machine
// reported before it. A command the reference forbids is refused
// NOT_PERMITTED (or SESSION_NOT_FOUND, which comes first) and changes
// nothing (Hash); one it allows is never refused NOT_PERMITTED, so a
// cluster with authentication off allows everything. Only an auth change
// that applied changes the auth state; while authentication is on some
// user has the role root; bearer tokens belong to users that have them;
// and a snapshot round trip keeps the auth state, the audit, the tokens,
// the sessions per user and the Hash, and the restored machine decides
// the rest of the series.
func FuzzAuthDecisions(f *testing.F) {
	for _, steps := range authSeeds() {
		f.Add(encodeSteps(steps...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const maxSteps = 256
		m := New()
		var (
			index    uint64
			sessions []uint64 // every session opened, live or ended
			seqs     = map[uint64]uint64{}
		)
		for i := 0; i+authStepLen <= len(data) && i/authStepLen < maxSteps; i += authStepLen {
			d := data[i : i+authStepLen]
			st := authStep{d[0] % numSteps, d[1], d[2], d[3], d[4], d[5], d[6], d[7]}
			if st.op == stepRestore {
				m = checkAuthRoundTrip(t, m)
				continue
			}
			cmd := st.command(m, sessions, seqs)
			authBefore := m.AuthState()
			owner, live := "", false
			if id := cmd.GetSessionId(); id != 0 {
				var s *fsmpb.Session
				if s, live = m.Session(id); live {
					owner = s.GetPrincipal()
				}
			}
			allowed, hashBefore := refAllowed(authBefore, cmd, owner), ""
			if !allowed {
				hashBefore = m.Hash()
			}
			index++
			res := m.Apply(index, cmd)
			code := res.GetError()

			switch {
			case allowed && code == fsmpb.Error_ERROR_NOT_PERMITTED:
				t.Fatalf("step %d: %v was refused (%s), but %q may (auth %v)", i/authStepLen, cmd, res.GetMessage(), cmd.GetPrincipal(), authBefore)
			case !allowed && code != fsmpb.Error_ERROR_NOT_PERMITTED && !(cmd.GetSessionId() != 0 && !live && code == fsmpb.Error_ERROR_SESSION_NOT_FOUND):
				t.Fatalf("step %d: %v by %q, who may not, answered %v %q (auth %v)", i/authStepLen, cmd, cmd.GetPrincipal(), code, res.GetMessage(), authBefore)
			case !allowed && m.Hash() != hashBefore:
				t.Fatalf("step %d: %v, refused, changed the state", i/authStepLen, cmd)
			}
			if id := res.GetSessionId(); id != 0 && !slices.Contains(sessions, id) {
				sessions = append(sessions, id)
			}
			authAfter := m.AuthState()
			if _, isChange := cmd.GetOp().(*fsmpb.Command_AuthChange); (!isChange || code != fsmpb.Error_ERROR_NONE) && !proto.Equal(authBefore, authAfter) {
				t.Fatalf("step %d: %v (%v) changed the auth state from %v to %v", i/authStepLen, cmd, code, authBefore, authAfter)
			}
			if err := checkAuthState(m, authAfter); err != nil {
				t.Fatalf("step %d: after %v: %v", i/authStepLen, cmd, err)
			}
		}
		checkAuthRoundTrip(t, m)
	})
}

// command is the command st makes of the machine's state: sessions are
// those opened so far (an index past them names none), tokens those the
// session holds.
func (st authStep) command(m *Machine, sessions []uint64, seqs map[uint64]uint64) *fsmpb.Command {
	pick := func(world []string, i byte) string { return world[int(i)%len(world)] }
	who, name := pick(fuzzPrincipals, st.who), pick(fuzzNames, st.name)
	sess := uint64(1) << 40 // no session
	if k := int(st.sess) % (len(sessions) + 1); k < len(sessions) {
		sess = sessions[k]
	}
	token := uint64(st.extra) // most often no hold's
	for _, h := range m.HoldsOf(sess) {
		if h.Lock == name {
			token = h.Token
		}
	}
	cmd := &fsmpb.Command{Principal: who}
	bySession := func() {
		seqs[sess]++
		cmd.SessionId, cmd.Seq, cmd.MinUnackedSeq = sess, seqs[sess], seqs[sess]
	}
	switch st.op {
	case stepAuthChange:
		op := &fsmpb.AuthChange{
			Kind:   fsmpb.AuthChange_Kind(st.extra & 0xf % 12), // UNSPECIFIED and one unknown too
			User:   pick(fuzzPrincipals, st.user),
			Role:   pick(fuzzRoles, st.role),
			Prefix: name,
			Perms:  uint32(st.perms % 10), // 0 and 8, 9 are no permissions
		}
		if st.extra&0x10 != 0 {
			h := sha256.Sum256([]byte{st.extra >> 5}) // a few tokens, so users collide
			op.TokenHash = h[:]
		}
		cmd.Op = &fsmpb.Command_AuthChange{AuthChange: op}
	case stepOpen:
		cmd.Op = &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{Owner: "fuzz"}}
	case stepAcquire:
		bySession()
		cmd.Op = &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: name, Wait: st.extra&1 != 0, LockDelayNanos: int64(st.extra&2) * 1e9}}
	case stepAcquireMany:
		bySession()
		next := pick(fuzzNames, st.name+1)
		cmd.Op = &fsmpb.Command_AcquireMany{AcquireMany: &fsmpb.AcquireMany{Locks: []string{name, next}}}
	case stepRelease:
		bySession()
		cmd.Op = &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: name, Token: token}}
	case stepClose:
		bySession()
		cmd.Op = &fsmpb.Command_CloseSession{CloseSession: &fsmpb.CloseSession{}}
	case stepCasRelease:
		cmd.Op = &fsmpb.Command_CasRelease{CasRelease: &fsmpb.CasRelease{Lock: name, SessionId: sess, Token: token}}
	case stepBlacklist:
		cmd.Op = &fsmpb.Command_BlacklistSession{BlacklistSession: &fsmpb.BlacklistSession{SessionId: sess}}
	case stepCancelWait:
		bySession()
		cmd.Op = &fsmpb.Command_CancelWait{CancelWait: &fsmpb.CancelWait{Lock: name, SessionId: sess, AcquireSeq: uint64(st.extra)}}
	case stepTimeout:
		cmd.Op = &fsmpb.Command_CancelWait{CancelWait: &fsmpb.CancelWait{Lock: name, SessionId: sess, AcquireSeq: uint64(st.extra), TimedOut: true}}
	case stepExpire:
		cmd.Op = &fsmpb.Command_ExpireSession{ExpireSession: &fsmpb.ExpireSession{SessionId: sess}}
	case stepExpireHold:
		cmd.Op = &fsmpb.Command_ExpireHold{ExpireHold: &fsmpb.ExpireHold{Lock: name, SessionId: sess, Token: token}}
	case stepEndLockDelay:
		from := uint64(st.extra)
		for _, d := range m.LockDelays() {
			if d.Lock == name {
				from = d.DelayFrom
			}
		}
		cmd.Op = &fsmpb.Command_EndLockDelay{EndLockDelay: &fsmpb.EndLockDelay{Lock: name, DelayFrom: from}}
	case stepRotateKey:
		cmd.Op = &fsmpb.Command_RotateSigningKey{RotateSigningKey: &fsmpb.RotateSigningKey{
			Seed: bytes.Repeat([]byte{st.extra | 0x80}, SigningKeySeedLen), First: st.extra&1 != 0, RetentionNanos: int64(st.extra&6) * 3600e9}}
	}
	return cmd
}

// refAllowed reports whether cmd's principal may make it under the auth
// state st, as DESIGN.md section 4 says, worked out apart from auth.go:
// with authentication off anyone may do anything; the leader's own
// commands are no one's; otherwise the principal must be a user, act only
// for its own sessions (owner is the principal of the live session cmd
// names; "" for none, or one opened with authentication off), and have
// the permission the command needs over each lock name it names. A grant
// over a prefix covers every name that starts with it; the role root
// covers everything.
func refAllowed(st *fsmpb.AuthState, cmd *fsmpb.Command, owner string) bool {
	if !st.GetEnabled() {
		return true
	}
	switch op := cmd.GetOp().(type) {
	case *fsmpb.Command_ExpireSession, *fsmpb.Command_ExpireHold, *fsmpb.Command_EndLockDelay, *fsmpb.Command_SetLogVersion:
		return true
	case *fsmpb.Command_CancelWait:
		if cmd.GetSessionId() == 0 {
			return true
		}
	case *fsmpb.Command_RotateSigningKey:
		if op.RotateSigningKey.GetFirst() {
			return true // the leader's first key
		}
	}
	who := cmd.GetPrincipal()
	i := slices.IndexFunc(st.GetUsers(), func(u *fsmpb.User) bool { return u.GetName() == who })
	if i < 0 {
		return false
	}
	if owner != "" && owner != who {
		return false
	}
	// What the user has over each prefix, its roles' grants merged (each
	// check below is of one permission, so merging loses nothing).
	root, grants := false, map[string]Perm{}
	for _, r := range st.GetUsers()[i].GetRoles() {
		if r == RootRole {
			root = true
		}
		for _, ro := range st.GetRoles() {
			if ro.GetName() == r {
				for _, p := range ro.GetPermissions() {
					grants[p.GetPrefix()] |= Perm(p.GetPerms())
				}
			}
		}
	}
	has := func(name string, p Perm) bool {
		if root {
			return true
		}
		for n := 0; n <= len(name); n++ { // every prefix of name, "" first
			if grants[name[:n]]&p != 0 {
				return true
			}
		}
		return false
	}
	switch op := cmd.GetOp().(type) {
	case *fsmpb.Command_OpenSession:
		if root {
			return true
		}
		for _, p := range grants {
			if p&PermLock != 0 {
				return true
			}
		}
		return false
	case *fsmpb.Command_Acquire:
		return has(op.Acquire.GetLock(), PermLock)
	case *fsmpb.Command_AcquireMany:
		for _, l := range op.AcquireMany.GetLocks() {
			if !has(l, PermLock) {
				return false
			}
		}
	case *fsmpb.Command_CasRelease:
		return has(op.CasRelease.GetLock(), PermAdmin)
	case *fsmpb.Command_BlacklistSession, *fsmpb.Command_AuthChange, *fsmpb.Command_RotateSigningKey:
		return has("", PermAdmin)
	}
	return true
}

// checkAuthState checks what must hold of every auth state: with
// authentication on some user has the role root, and each bearer token
// belongs to a user that has one.
func checkAuthState(m *Machine, st *fsmpb.AuthState) error {
	if st.GetEnabled() && !slices.ContainsFunc(st.GetUsers(), func(u *fsmpb.User) bool { return slices.Contains(u.GetRoles(), RootRole) }) {
		return fmt.Errorf("authentication is on and no user has the role root: %v", st)
	}
	withToken := 0
	for _, u := range st.GetUsers() {
		if m.UserHasToken(u.GetName()) {
			withToken++
		}
	}
	tokens := m.UserTokens()
	if len(tokens) != withToken {
		return fmt.Errorf("%d bearer tokens for %d users that have one", len(tokens), withToken)
	}
	for h, u := range tokens {
		if !m.UserHasToken(u) {
			return fmt.Errorf("a bearer token names user %q, who has none", u)
		}
		if got, ok := m.UserOfToken(h); !ok || got != u {
			return fmt.Errorf("UserOfToken says %q, %v; UserTokens %q", got, ok, u)
		}
	}
	return nil
}

// checkAuthRoundTrip restores a machine from m's snapshot, checks that it
// is m's state, and returns it.
func checkAuthRoundTrip(t *testing.T, m *Machine) *Machine {
	t.Helper()
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	r := New()
	if err := r.Restore(snap); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if !proto.Equal(m.AuthState(), r.AuthState()) || m.AuthEnabled() != r.AuthEnabled() {
		t.Fatalf("restored auth state %v, want %v", r.AuthState(), m.AuthState())
	}
	if m.Hash() != r.Hash() {
		t.Fatal("the restored machine's hash differs")
	}
	if !maps.Equal(m.UserTokens(), r.UserTokens()) {
		t.Fatalf("restored tokens %v, want %v", r.UserTokens(), m.UserTokens())
	}
	if a, b := m.AuditRecords(), r.AuditRecords(); len(a) != len(b) || !slices.EqualFunc(a, b, func(x, y *fsmpb.AuditRecord) bool { return proto.Equal(x, y) }) {
		t.Fatalf("restored audit %v, want %v", b, a)
	}
	for _, p := range fuzzPrincipals {
		if m.NumSessionsOf(p) != r.NumSessionsOf(p) {
			t.Fatalf("restored machine counts %d sessions of %q, want %d", r.NumSessionsOf(p), p, m.NumSessionsOf(p))
		}
	}
	if err := checkIndexes(r); err != nil {
		t.Fatalf("restored machine: %v", err)
	}
	return r
}

// authSeeds are series as an operator and users make them.
func authSeeds() [][]authStep {
	setup := []authStep{
		change(pNone, fsmpb.AuthChange_ADD_USER, pRoot, 0, 0, 0),
		change(pNone, fsmpb.AuthChange_GRANT_ROLE, pRoot, rRoot, 0, 0),
		change(pNone, fsmpb.AuthChange_ADD_ROLE, 0, rJobs, 0, 0),
		change(pNone, fsmpb.AuthChange_GRANT, 0, rJobs, nASlash, byte(PermLock|PermRead)),
		change(pNone, fsmpb.AuthChange_ADD_USER, pAlice, 0, 0, 0),
		change(pNone, fsmpb.AuthChange_GRANT_ROLE, pAlice, rJobs, 0, 0),
		change(pNone, fsmpb.AuthChange_ADD_USER, pBob, 0, 0, 0),
		change(pNone, fsmpb.AuthChange_GRANT_ROLE, pBob, rJobs, 0, 0),
		change(pNone, fsmpb.AuthChange_ENABLE, 0, 0, 0, 0),
	}
	with := func(steps ...authStep) []authStep { return append(slices.Clone(setup), steps...) }
	return [][]authStep{
		// Users lock under their prefix and nowhere else; a stranger and
		// the unnamed open nothing; another user's session is not theirs.
		with(
			authStep{op: stepOpen, who: pAlice},
			authStep{op: stepAcquire, who: pAlice, sess: 0, name: nA1},
			authStep{op: stepAcquire, who: pAlice, sess: 0, name: nB},
			authStep{op: stepAcquireMany, who: pAlice, sess: 0, name: nAB2},
			authStep{op: stepOpen, who: pMallory},
			authStep{op: stepOpen, who: pNone},
			authStep{op: stepRelease, who: pBob, sess: 0, name: nA1},
			authStep{op: stepClose, who: pBob, sess: 0},
			authStep{op: stepRelease, who: pAlice, sess: 0, name: nA1},
			authStep{op: stepClose, who: pAlice, sess: 0},
		),
		// Only an admin blacklists, cas-releases and changes auth; the
		// last root user cannot go while authentication is on.
		with(
			authStep{op: stepOpen, who: pAlice},
			authStep{op: stepAcquire, who: pAlice, sess: 0, name: nA1},
			authStep{op: stepCasRelease, who: pBob, sess: 0, name: nA1},
			authStep{op: stepBlacklist, who: pBob, sess: 0},
			change(pAlice, fsmpb.AuthChange_GRANT_ROLE, pAlice, rRoot, 0, 0),
			change(pRoot, fsmpb.AuthChange_DELETE_USER, pRoot, 0, 0, 0),
			change(pRoot, fsmpb.AuthChange_REVOKE_ROLE, pRoot, rRoot, 0, 0),
			authStep{op: stepCasRelease, who: pRoot, sess: 0, name: nA1},
			authStep{op: stepBlacklist, who: pRoot, sess: 0},
			authStep{op: stepRestore},
			// The leader's first key is no one's; a rotation is an admin's.
			authStep{op: stepRotateKey, who: pNone, extra: 1},
			authStep{op: stepRotateKey, who: pAlice, extra: 2},
			authStep{op: stepRotateKey, who: pRoot, extra: 4},
			authStep{op: stepRestore},
			change(pRoot, fsmpb.AuthChange_GRANT_ROLE, pBob, rRoot, 0, 0),
			change(pBob, fsmpb.AuthChange_REVOKE_ROLE, pRoot, rRoot, 0, 0),
			change(pBob, fsmpb.AuthChange_DELETE_USER, pRoot, 0, 0, 0),
		),
		// A revoked grant takes effect at the next command; disabled,
		// everyone may do anything, and enabling needs a root user.
		with(
			authStep{op: stepOpen, who: pBob},
			change(pRoot, fsmpb.AuthChange_REVOKE, 0, rJobs, nASlash, 0),
			authStep{op: stepAcquire, who: pBob, sess: 0, name: nA1},
			authStep{op: stepOpen, who: pBob},
			authStep{op: stepRestore},
			change(pRoot, fsmpb.AuthChange_DISABLE, 0, 0, 0, 0),
			authStep{op: stepOpen, who: pMallory},
			authStep{op: stepAcquire, who: pNone, sess: 0, name: nB},
			change(pMallory, fsmpb.AuthChange_DELETE_USER, pRoot, 0, 0, 0),
			change(pNone, fsmpb.AuthChange_ENABLE, 0, 0, 0, 0),
			authStep{op: stepExpire, who: pMallory, sess: 0},
		),
		// Read alone, or admin, opens no session; admin over a prefix
		// ends holds under it only.
		with(
			change(pRoot, fsmpb.AuthChange_REVOKE_ROLE, pBob, rJobs, 0, 0),
			change(pRoot, fsmpb.AuthChange_ADD_ROLE, 0, rOps, 0, 0),
			change(pRoot, fsmpb.AuthChange_GRANT, 0, rOps, nB, byte(PermRead)),
			change(pRoot, fsmpb.AuthChange_GRANT_ROLE, pBob, rOps, 0, 0),
			authStep{op: stepOpen, who: pBob},
			change(pRoot, fsmpb.AuthChange_GRANT, 0, rOps, nA, byte(PermAdmin)),
			authStep{op: stepOpen, who: pBob},
			authStep{op: stepOpen, who: pAlice},
			authStep{op: stepAcquire, who: pAlice, sess: 0, name: nA1},
			authStep{op: stepCasRelease, who: pBob, sess: 0, name: nB},
			authStep{op: stepCasRelease, who: pBob, sess: 0, name: nA1},
		),
		// Tokens, and permissions over prefixes that are names' starts.
		{
			authStep{op: stepAuthChange, who: pNone, user: pRoot, extra: byte(fsmpb.AuthChange_ADD_USER) | 0x10},
			authStep{op: stepAuthChange, who: pNone, user: pAlice, extra: byte(fsmpb.AuthChange_ADD_USER) | 0x10},
			change(pNone, fsmpb.AuthChange_GRANT_ROLE, pRoot, rRoot, 0, 0),
			change(pNone, fsmpb.AuthChange_ADD_ROLE, 0, rOps, 0, 0),
			change(pNone, fsmpb.AuthChange_GRANT, 0, rOps, nA, byte(PermAdmin|PermLock)),
			change(pNone, fsmpb.AuthChange_GRANT_ROLE, pBob, rOps, 0, 0),
			change(pNone, fsmpb.AuthChange_ADD_USER, pBob, 0, 0, 0),
			change(pNone, fsmpb.AuthChange_GRANT_ROLE, pBob, rOps, 0, 0),
			change(pNone, fsmpb.AuthChange_ENABLE, 0, 0, 0, 0),
			authStep{op: stepOpen, who: pBob},
			authStep{op: stepAcquire, who: pBob, sess: 0, name: nAB2},
			authStep{op: stepAcquire, who: pBob, sess: 0, name: nB},
			authStep{op: stepCasRelease, who: pBob, sess: 0, name: nAB2},
			change(pRoot, fsmpb.AuthChange_DELETE_ROLE, 0, rOps, 0, 0),
			authStep{op: stepRestore},
		},
	}
}
