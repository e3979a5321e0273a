package fsm

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// TestScripts runs the golden scripts in testdata. Each command that applies
// a log entry uses the next index (tokens and session ids are those
// indexes), sets the entry's wall clock to index seconds, prints
// "<index>: <result>", and then checks every invariant of the machine,
// including a Snapshot/Restore round trip (while the machine has at most
// roundTripMaxLocks locks, and at the end of each script).
//
// Regenerate the expected output with: go test ./internal/fsm -rewrite
func TestScripts(t *testing.T) {
	paths, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scripts in testdata: %v", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			h := &harness{m: New()}
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				out := h.run(t, d)
				if err := checkIndexes(h.m); err != nil {
					d.Fatalf(t, "invariant broken after %q: %v", d.Cmd, err)
				}
				if h.m.NumLocks() <= roundTripMaxLocks {
					if err := checkRoundTrip(h.m); err != nil {
						d.Fatalf(t, "after %q: %v", d.Cmd, err)
					}
				}
				return out
			})
			if err := checkRoundTrip(h.m); err != nil {
				t.Fatalf("at the end: %v", err)
			}
		})
	}
}

// roundTripMaxLocks keeps the per-command round trip off the scripts that
// fill the machine up to its limits (a snapshot of 100000 locks per command
// is slow under -race).
const roundTripMaxLocks = 10000

type harness struct {
	m     *Machine
	index uint64
	as    string // the principal of the command being run (as=USER)
	// logVersion, if not 0, is the cluster's log version the command is
	// proposed at (log-version=N): it goes through ForLogVersion first,
	// as the leader's proposals do, and a refusal applies nothing.
	logVersion uint32
}

func (h *harness) run(t *testing.T, d *datadriven.TestData) string {
	// Any command: as=USER names its principal, as the API stamps it;
	// log-version=N proposes it at that log version (ForLogVersion).
	h.as, h.logVersion = "", 0
	d.MaybeScanArgs(t, "as", &h.as)
	d.MaybeScanArgs(t, "log-version", &h.logVersion)
	switch d.Cmd {
	case "auth":
		// Example: auth change=grant role=jobs prefix=jobs/ perms=lock,read as=root
		// change= is an AuthChange kind in lower case with dashes
		// (add-user user=u token=WORD stores the SHA-256 of WORD).
		var kind string
		d.ScanArgs(t, "change", &kind)
		v, ok := fsmpb.AuthChange_Kind_value[strings.ToUpper(strings.ReplaceAll(kind, "-", "_"))]
		if !ok {
			d.Fatalf(t, "unknown auth change %q", kind)
		}
		op := &fsmpb.AuthChange{Kind: fsmpb.AuthChange_Kind(v)}
		d.MaybeScanArgs(t, "user", &op.User)
		d.MaybeScanArgs(t, "role", &op.Role)
		d.MaybeScanArgs(t, "prefix", &op.Prefix)
		if a, ok := d.Arg("token"); ok {
			h := sha256.Sum256([]byte(a.SingleVal(t)))
			op.TokenHash = h[:]
		}
		if a, ok := d.Arg("perms"); ok {
			p, err := ParsePerm(strings.Join(a.Vals, ","))
			if err != nil {
				d.Fatalf(t, "%v", err)
			}
			op.Perms = uint32(p)
		}
		return h.apply(&fsmpb.Command{Op: &fsmpb.Command_AuthChange{AuthChange: op}})

	case "audit-note":
		// Example: audit-note action=(removed member "n2") as=root
		a, _ := d.Arg("action")
		return h.apply(&fsmpb.Command{Op: &fsmpb.Command_AuditNote{AuditNote: &fsmpb.AuditNote{Action: strings.Join(a.Vals, ", ")}}})

	case "auth-state":
		// Example: auth-state
		// Prints AuthState (users, their roles, roles and permissions)
		// and the audit records.
		var b strings.Builder
		st := h.m.authProto()
		fmt.Fprintf(&b, "enabled=%v\n", st.GetEnabled())
		for _, u := range st.GetUsers() {
			tok := ""
			if len(u.GetTokenHash()) > 0 {
				tok = " token"
			}
			fmt.Fprintf(&b, "user %s%s roles=%v\n", u.GetName(), tok, u.GetRoles())
		}
		for _, r := range st.GetRoles() {
			fmt.Fprintf(&b, "role %s", r.GetName())
			for _, p := range r.GetPermissions() {
				fmt.Fprintf(&b, " %q:%s", p.GetPrefix(), Perm(p.GetPerms()))
			}
			b.WriteString("\n")
		}
		for _, r := range h.m.AuditRecords() {
			fmt.Fprintf(&b, "audit %d %ds by=%q: %s\n", r.GetIndex(), r.GetWallUnixNano()/int64(time.Second), r.GetPrincipal(), r.GetAction())
		}
		return b.String()

	case "rotate-signing-key":
		// Example: rotate-signing-key seed=WORD retention=24h first as=root
		// (seed=WORD is the SHA-256 of WORD; seed-len=N a seed of N bytes
		// 0x01, seed-len=N zero a seed of N zero bytes; session= makes a
		// session send it, which is refused.)
		op := &fsmpb.RotateSigningKey{First: d.HasArg("first")}
		if a, ok := d.Arg("seed"); ok {
			h := sha256.Sum256([]byte(a.SingleVal(t)))
			op.Seed = h[:]
		}
		if a, ok := d.Arg("seed-len"); ok {
			n, _ := strconv.Atoi(a.SingleVal(t))
			op.Seed = bytes.Repeat([]byte{1}, n)
			if d.HasArg("zero") {
				op.Seed = make([]byte, n)
			}
		}
		if a, ok := d.Arg("retention"); ok {
			op.RetentionNanos = int64(parseDuration(t, d, a.SingleVal(t)))
		}
		return h.apply(sessionCmd(t, d, &fsmpb.Command{Op: &fsmpb.Command_RotateSigningKey{RotateSigningKey: op}}))

	case "signing-keys":
		// Example: signing-keys
		// Prints SigningKeys() (the entry's wall clock is its index in
		// seconds) and the first bytes of each key's seed's SHA-256.
		var b strings.Builder
		for _, k := range h.m.SigningKeys() {
			seed, _ := h.m.SigningSeed(k.ID)
			fmt.Fprintf(&b, "key %d created=%ds", k.ID, k.CreatedUnixNano/int64(time.Second))
			if k.Current {
				b.WriteString(" current")
			} else {
				fmt.Fprintf(&b, " retired=%ds not-after=%ds", k.RetiredUnixNano/int64(time.Second), k.NotAfterUnixNano/int64(time.Second))
			}
			sum := sha256.Sum256(seed)
			fmt.Fprintf(&b, " seed-sha=%x…\n", sum[:4])
		}
		if id, ok := h.m.CurrentSigningKey(); ok {
			fmt.Fprintf(&b, "current %d\n", id)
		}
		return b.String()

	case "open-session":
		// Example: open-session ttl=10s owner=worker-1 nonce=7 secret=s3cret
		// (owner-len=N uses an owner of N bytes; secret=WORD stores the
		// SHA-256 of WORD, secret-hash-len=N a hash of N bytes.)
		op := &fsmpb.OpenSession{}
		if a, ok := d.Arg("ttl"); ok {
			op.TtlNanos = int64(parseDuration(t, d, a.SingleVal(t)))
		}
		if a, ok := d.Arg("owner"); ok {
			op.Owner = a.SingleVal(t)
		}
		d.MaybeScanArgs(t, "nonce", &op.Nonce)
		op.SecretHash = secretArg(t, d)
		if a, ok := d.Arg("owner-len"); ok {
			n, _ := strconv.Atoi(a.SingleVal(t))
			op.Owner = strings.Repeat("o", n)
		}
		return h.apply(&fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: op}})

	case "acquire":
		// Example: acquire session=1 seq=1 lock=x key=k wait timeout=5s min-unacked=1 shared limit=3 lock-delay=15s value=10.0.0.1:80
		// (key-len=N uses a key of N bytes, value-len=N a value of N bytes.)
		op := &fsmpb.Acquire{Lock: lockArg(t, d), Wait: d.HasArg("wait"), Shared: d.HasArg("shared"), Value: valueArg(t, d)}
		d.MaybeScanArgs(t, "key", &op.OwnerKey)
		d.MaybeScanArgs(t, "limit", &op.Limit)
		if a, ok := d.Arg("key-len"); ok {
			n, _ := strconv.Atoi(a.SingleVal(t))
			op.OwnerKey = strings.Repeat("k", n)
		}
		if a, ok := d.Arg("timeout"); ok {
			op.WaitTimeoutNanos = int64(parseDuration(t, d, a.SingleVal(t)))
		}
		if a, ok := d.Arg("hold-limit"); ok {
			op.HoldLimitNanos = int64(parseDuration(t, d, a.SingleVal(t)))
		}
		if a, ok := d.Arg("lock-delay"); ok {
			op.LockDelayNanos = int64(parseDuration(t, d, a.SingleVal(t)))
		}
		return h.apply(sessionCmd(t, d, &fsmpb.Command{Op: &fsmpb.Command_Acquire{Acquire: op}}))

	case "proclaim":
		// Example: proclaim session=1 seq=4 lock=x token=5 key=k value=10.0.0.1:81
		// (value-len=N uses a value of N bytes.)
		op := &fsmpb.Proclaim{Lock: lockArg(t, d), Value: valueArg(t, d)}
		d.MaybeScanArgs(t, "token", &op.Token)
		d.MaybeScanArgs(t, "key", &op.OwnerKey)
		return h.apply(sessionCmd(t, d, &fsmpb.Command{Op: &fsmpb.Command_Proclaim{Proclaim: op}}))

	case "end-lock-delay":
		// Example: end-lock-delay lock=x from=7 (session= makes a session
		// send it, which is refused)
		op := &fsmpb.EndLockDelay{Lock: lockArg(t, d)}
		d.MaybeScanArgs(t, "from", &op.DelayFrom)
		return h.apply(sessionCmd(t, d, &fsmpb.Command{Op: &fsmpb.Command_EndLockDelay{EndLockDelay: op}}))

	case "lock-delays":
		// Example: lock-delays
		// Prints LockDelays(), what a new leader re-arms.
		var b strings.Builder
		for _, r := range h.m.LockDelays() {
			fmt.Fprintf(&b, "lock-delay %s from=%d delay=%v\n", r.Lock, r.DelayFrom, time.Duration(r.DelayNanos))
		}
		return b.String()

	case "expire-hold":
		// Example: expire-hold lock=x holder=1 token=5 key=k (session=
		// makes a session send it, which is refused; key= names the
		// hold's owner key, from log version 14)
		op := &fsmpb.ExpireHold{Lock: lockArg(t, d)}
		d.MaybeScanArgs(t, "holder", &op.SessionId)
		d.MaybeScanArgs(t, "token", &op.Token)
		if d.HasArg("key") {
			var key string
			d.ScanArgs(t, "key", &key)
			op.OwnerKey = &key
		}
		return h.apply(sessionCmd(t, d, &fsmpb.Command{Op: &fsmpb.Command_ExpireHold{ExpireHold: op}}))

	case "revoke":
		// Example: revoke lock=x token=5 grace=30s as=root
		// (session= makes a session send it: an operator's command
		// ignores it, as CasRelease does.)
		op := &fsmpb.RevokeHold{Lock: lockArg(t, d)}
		d.MaybeScanArgs(t, "token", &op.Token)
		if a, ok := d.Arg("grace"); ok {
			op.GraceNanos = int64(parseDuration(t, d, a.SingleVal(t)))
		}
		return h.apply(sessionCmd(t, d, &fsmpb.Command{Op: &fsmpb.Command_RevokeHold{RevokeHold: op}}))

	case "end-revoked-hold":
		// Example: end-revoked-hold lock=x holder=1 token=5 (session=
		// makes a session send it, which is refused)
		op := &fsmpb.EndRevokedHold{Lock: lockArg(t, d)}
		d.MaybeScanArgs(t, "holder", &op.SessionId)
		d.MaybeScanArgs(t, "token", &op.Token)
		return h.apply(sessionCmd(t, d, &fsmpb.Command{Op: &fsmpb.Command_EndRevokedHold{EndRevokedHold: op}}))

	case "revocations":
		// Example: revocations
		// Prints Revocations(), what a new leader re-arms.
		var b strings.Builder
		for _, r := range h.m.Revocations() {
			fmt.Fprintf(&b, "revocation %s s%d token=%d grace=%v\n", r.Lock, r.SessionID, r.Token, time.Duration(r.GraceNanos))
		}
		return b.String()

	case "acquire-many":
		// Example: acquire-many session=1 seq=2 locks=(a, b, c) key=k all shared limit=3 hold-limit=30s lock-delay=5s
		// Example: acquire-many session=1 seq=2 locks=(m, cfg, pool) modes=(mutex, read/8, permit/3) all
		op := &fsmpb.AcquireMany{All: d.HasArg("all"), Shared: d.HasArg("shared")}
		d.MaybeScanArgs(t, "limit", &op.Limit)
		if a, ok := d.Arg("modes"); ok {
			// Each mode is mutex, read/N, write/N or permit/N (N: the
			// lock's limit); anything else is shared with limit 0.
			for _, v := range a.Vals {
				kind, n, _ := strings.Cut(v, "/")
				limit, _ := strconv.ParseUint(n, 10, 32)
				op.Modes = append(op.Modes, &fsmpb.LockMode{Shared: kind != "mutex" && kind != "write", Limit: uint32(limit)})
			}
		}
		if a, ok := d.Arg("hold-limit"); ok {
			op.HoldLimitNanos = int64(parseDuration(t, d, a.SingleVal(t)))
		}
		if a, ok := d.Arg("lock-delay"); ok {
			op.LockDelayNanos = int64(parseDuration(t, d, a.SingleVal(t)))
		}
		if a, ok := d.Arg("locks"); ok {
			for _, v := range a.Vals {
				op.Locks = append(op.Locks, unescape(t, d, v))
			}
		}
		if a, ok := d.Arg("count"); ok {
			// count=N names the locks many/1 .. many/N.
			n, _ := strconv.Atoi(a.SingleVal(t))
			for i := 1; i <= n; i++ {
				op.Locks = append(op.Locks, fmt.Sprintf("many/%d", i))
			}
		}
		d.MaybeScanArgs(t, "key", &op.OwnerKey)
		return h.apply(sessionCmd(t, d, &fsmpb.Command{Op: &fsmpb.Command_AcquireMany{AcquireMany: op}}))

	case "release":
		// Example: release session=1 seq=3 lock=x token=5 key=k
		op := &fsmpb.Release{Lock: lockArg(t, d)}
		d.MaybeScanArgs(t, "token", &op.Token)
		d.MaybeScanArgs(t, "key", &op.OwnerKey)
		return h.apply(sessionCmd(t, d, &fsmpb.Command{Op: &fsmpb.Command_Release{Release: op}}))

	case "cas-release":
		// Example: cas-release lock=x holder=1 token=5
		// (session= and seq= optionally name a requesting session.)
		op := &fsmpb.CasRelease{Lock: lockArg(t, d)}
		d.MaybeScanArgs(t, "holder", &op.SessionId)
		d.MaybeScanArgs(t, "token", &op.Token)
		return h.apply(sessionCmd(t, d, &fsmpb.Command{Op: &fsmpb.Command_CasRelease{CasRelease: op}}))

	case "cancel-wait":
		// Example: cancel-wait lock=x waiter=2 acquire-seq=4 timed-out
		// (without session=, it is the leader's command, as on a timeout;
		// abandoned instead of timed-out is a server's cleanup for a caller
		// that went away.)
		op := &fsmpb.CancelWait{Lock: lockArg(t, d), TimedOut: d.HasArg("timed-out"), Abandoned: d.HasArg("abandoned")}
		d.MaybeScanArgs(t, "waiter", &op.SessionId)
		d.MaybeScanArgs(t, "acquire-seq", &op.AcquireSeq)
		return h.apply(sessionCmd(t, d, &fsmpb.Command{Op: &fsmpb.Command_CancelWait{CancelWait: op}}))

	case "expire-session":
		// Example: expire-session id=1
		op := &fsmpb.ExpireSession{}
		d.MaybeScanArgs(t, "id", &op.SessionId)
		return h.apply(&fsmpb.Command{Op: &fsmpb.Command_ExpireSession{ExpireSession: op}})

	case "close-session":
		// Example: close-session session=1 seq=9
		return h.apply(sessionCmd(t, d, &fsmpb.Command{Op: &fsmpb.Command_CloseSession{CloseSession: &fsmpb.CloseSession{}}}))

	case "blacklist":
		// Example: blacklist id=1
		op := &fsmpb.BlacklistSession{}
		d.MaybeScanArgs(t, "id", &op.SessionId)
		return h.apply(&fsmpb.Command{Op: &fsmpb.Command_BlacklistSession{BlacklistSession: op}})

	case "empty":
		// Example: empty
		// An entry without an operation (a malformed command).
		return h.apply(&fsmpb.Command{})

	case "noop":
		// Example: noop
		// An entry without a command (leader no-op): only the index moves.
		h.index++
		h.m.SetApplied(h.index)
		return fmt.Sprintf("%d: applied\n", h.index)

	case "fill":
		// Example: fill session=1 from-seq=10 n=1024 lock=x wait shared ack min-unacked=10 distinct-keys distinct-locks
		// Applies n Acquires of session from seq from-seq on (each seq one
		// more), of lock (lock/i with distinct-locks), under key "" (k<i>
		// with distinct-keys), waiting with wait, reading with shared (a
		// read/write lock of MaxHoldersPerLock); min-unacked is the given
		// one, or each command's own seq with ack. Prints outcome counts.
		var sessionID, from, n, minUnacked uint64
		d.ScanArgs(t, "session", &sessionID)
		d.ScanArgs(t, "from-seq", &from)
		d.ScanArgs(t, "n", &n)
		d.MaybeScanArgs(t, "min-unacked", &minUnacked)
		name := lockArg(t, d)
		counts := map[string]int{}
		for i := range n {
			op := &fsmpb.Acquire{Lock: name, Wait: d.HasArg("wait")}
			if d.HasArg("shared") {
				op.Shared, op.Limit = true, rules.MaxHoldersPerLock
			}
			if d.HasArg("distinct-locks") {
				op.Lock = fmt.Sprintf("%s/%d", name, i)
			}
			if d.HasArg("distinct-keys") {
				op.OwnerKey = fmt.Sprintf("k%d", i)
			}
			cmd := &fsmpb.Command{SessionId: sessionID, Seq: from + i, MinUnackedSeq: minUnacked,
				Op: &fsmpb.Command_Acquire{Acquire: op}}
			if d.HasArg("ack") {
				cmd.MinUnackedSeq = cmd.Seq
			}
			h.index++
			cmd.WallTimeUnixNano = int64(h.index) * int64(time.Second)
			res := h.m.Apply(h.index, cmd)
			key := res.GetError().String()
			if res.GetError() == fsmpb.Error_ERROR_NONE {
				key = res.GetAcquire().GetStatus().String()
			}
			counts[key]++
		}
		keys := make([]string, 0, len(counts))
		for k := range counts {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var b strings.Builder
		fmt.Fprintf(&b, "applied %d..%d:", h.index-n+1, h.index)
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%d", k, counts[k])
		}
		return b.String() + "\n"

	case "check":
		// Example: check lock=x token=5
		var token uint64
		d.ScanArgs(t, "token", &token)
		held, holder := h.m.Check(lockArg(t, d), token)
		if holder == nil {
			return fmt.Sprintf("held=%v holder=none\n", held)
		}
		return fmt.Sprintf("held=%v holder=%s\n", held, formatHolder(holder))

	case "state":
		// Example: state
		// Prints the applied index, the sessions (with their cached
		// results) and the locks (holders, then waiters in queue order).
		return h.state()

	case "waiters":
		// Example: waiters
		// Prints Waiters() and SessionIDs(), what a new leader re-arms.
		var b strings.Builder
		for _, s := range h.m.SessionIDs() {
			fmt.Fprintf(&b, "session %d ttl=%v blacklisted=%v\n", s.ID, time.Duration(s.TTLNanos), s.Blacklisted)
		}
		for _, w := range h.m.Waiters() {
			fmt.Fprintf(&b, "waiter %s s%d seq=%d timeout=%v\n", w.Lock, w.SessionID, w.AcquireSeq, time.Duration(w.TimeoutNanos))
		}
		return b.String()

	case "past":
		// Example: past lock=x
		// Prints PastHolds(x), the most recent end first, each with its
		// value if it has one (from log version 13).
		var b strings.Builder
		for _, p := range h.m.PastHolds(lockArg(t, d)) {
			fmt.Fprintf(&b, "s%d/%q owner=%q token=%d%s since=%v ended=%v at=%d %s%s\n", p.SessionID, p.OwnerKey, p.Owner, p.Token,
				sharedMark(p.Shared), time.Duration(p.Since), time.Duration(p.Ended), p.EndedIndex, p.How, valueMark(p.Value))
		}
		return b.String()

	case "history-complete":
		// Example: history-complete lock=x after=5
		// Prints HistoryComplete(x, 5) and the history's floor.
		var after uint64
		d.ScanArgs(t, "after", &after)
		return fmt.Sprintf("%v (floor %d)\n", h.m.HistoryComplete(lockArg(t, d), after), h.m.HistoryFloor())

	case "set-log-version":
		// Example: set-log-version version=10
		// Applies a SetLogVersion entry, as a leader does once every
		// member reads the version.
		var v uint32
		d.ScanArgs(t, "version", &v)
		return h.apply(&fsmpb.Command{Op: &fsmpb.Command_SetLogVersion{SetLogVersion: &fsmpb.SetLogVersion{Version: v}}})

	case "restart":
		// Example: restart
		// Replaces the machine by one restored from its snapshot, as a
		// member that restarts from its snapshot (with nothing to replay)
		// or installs the leader's has; prints whether they hash alike.
		snap, err := h.m.Snapshot()
		if err != nil {
			d.Fatalf(t, "snapshot: %v", err)
		}
		r := New()
		if err := r.Restore(snap); err != nil {
			d.Fatalf(t, "restore: %v", err)
		}
		same := r.Hash() == h.m.Hash()
		h.m = r
		return fmt.Sprintf("restored at %d, log version %d, same hash: %v\n", r.AppliedIndex(), r.LogVersion(), same)

	case "locks":
		// Example: locks prefix=a/ after=a/b limit=2
		var prefix, after string
		var limit int
		d.MaybeScanArgs(t, "prefix", &prefix)
		d.MaybeScanArgs(t, "after", &after)
		d.MaybeScanArgs(t, "limit", &limit)
		var b strings.Builder
		for _, l := range h.m.Locks(prefix, after, limit) {
			fmt.Fprintln(&b, l.GetName())
		}
		return b.String()

	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
		return ""
	}
}

// apply applies cmd as the next entry and formats its result.
func (h *harness) apply(cmd *fsmpb.Command) string {
	if h.logVersion != 0 {
		if err := ForLogVersion(cmd, h.logVersion); err != nil {
			return fmt.Sprintf("not proposed: %v\n", err)
		}
	}
	h.index++
	cmd.WallTimeUnixNano = int64(h.index) * int64(time.Second)
	if cmd.Principal == "" {
		cmd.Principal = h.as
	}
	return fmt.Sprintf("%d: %s", h.index, formatResult(h.m.Apply(h.index, cmd)))
}

// sessionCmd sets the session, seq and min_unacked_seq of cmd from the
// arguments session=, seq= and min-unacked=.
func sessionCmd(t *testing.T, d *datadriven.TestData, cmd *fsmpb.Command) *fsmpb.Command {
	d.MaybeScanArgs(t, "session", &cmd.SessionId)
	d.MaybeScanArgs(t, "seq", &cmd.Seq)
	d.MaybeScanArgs(t, "min-unacked", &cmd.MinUnackedSeq)
	cmd.SecretHash = secretArg(t, d)
	return cmd
}

// secretArg is the hash of secret=WORD (nil without), or with
// secret-hash-len=N a hash of N bytes 0x01.
func secretArg(t *testing.T, d *datadriven.TestData) []byte {
	if a, ok := d.Arg("secret-hash-len"); ok {
		n, _ := strconv.Atoi(a.SingleVal(t))
		return bytes.Repeat([]byte{1}, n)
	}
	a, ok := d.Arg("secret")
	if !ok {
		return nil
	}
	h := sha256.Sum256([]byte(a.SingleVal(t)))
	return h[:]
}

// lockArg returns lock=NAME (with Go escapes such as \t and \x00 decoded),
// or with name-len=N a name of N bytes "nnn…".
func lockArg(t *testing.T, d *datadriven.TestData) string {
	var name string
	d.MaybeScanArgs(t, "lock", &name)
	name = unescape(t, d, name)
	if a, ok := d.Arg("name-len"); ok {
		n, err := strconv.Atoi(a.SingleVal(t))
		if err != nil {
			d.Fatalf(t, "name-len: %v", err)
		}
		name = strings.Repeat("n", n)
	}
	return name
}

// valueArg is a hold's value: value=V (escapes unquoted) or value-len=N
// bytes.
func valueArg(t *testing.T, d *datadriven.TestData) string {
	var v string
	d.MaybeScanArgs(t, "value", &v)
	v = unescape(t, d, v)
	if a, ok := d.Arg("value-len"); ok {
		n, err := strconv.Atoi(a.SingleVal(t))
		if err != nil {
			d.Fatalf(t, "value-len: %v", err)
		}
		v = strings.Repeat("v", n)
	}
	return v
}

// unescape decodes Go escapes in a script value.
func unescape(t *testing.T, d *datadriven.TestData, s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	u, err := strconv.Unquote(`"` + s + `"`)
	if err != nil {
		d.Fatalf(t, "unescape %s: %v", s, err)
	}
	return u
}

func parseDuration(t *testing.T, d *datadriven.TestData, s string) time.Duration {
	v, err := time.ParseDuration(s)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	return v
}

// formatResult prints a Result: "ok" or the error, then each field that is
// set, one per line.
func formatResult(r *fsmpb.Result) string {
	var b strings.Builder
	if r.GetError() == fsmpb.Error_ERROR_NONE {
		b.WriteString("ok\n")
	} else {
		fmt.Fprintf(&b, "%s: %s\n", strings.TrimPrefix(r.GetError().String(), "ERROR_"), r.GetMessage())
	}
	if r.GetSessionId() != 0 {
		fmt.Fprintf(&b, "  session %d\n", r.GetSessionId())
	}
	if o := r.GetAcquire(); o != nil {
		fmt.Fprintf(&b, "  acquire %s\n", formatOutcome(o))
	}
	for _, o := range r.GetAcquireMany() {
		fmt.Fprintf(&b, "  many %s\n", formatOutcome(o))
	}
	if r.GetRemainingCount() != 0 {
		fmt.Fprintf(&b, "  remaining %d\n", r.GetRemainingCount())
	}
	formatCycle(&b, "  ", r.GetDeadlock().GetEdges())
	for _, g := range r.GetGrants() {
		fmt.Fprintf(&b, "  grant %s to s%d seq=%d token=%d%s\n", g.GetLock(), g.GetSessionId(), g.GetAcquireSeq(), g.GetToken(), grantMarks(g))
	}
	for _, w := range r.GetWaitsEnded() {
		fmt.Fprintf(&b, "  wait-ended %s s%d seq=%d %s\n", w.GetLock(), w.GetSessionId(), w.GetAcquireSeq(),
			strings.TrimPrefix(w.GetError().String(), "ERROR_"))
		formatCycle(&b, "    ", w.GetDeadlock().GetEdges())
	}
	for _, id := range r.GetSessionsEnded() {
		fmt.Fprintf(&b, "  session-ended %d\n", id)
	}
	for _, h := range r.GetHoldsEnded() {
		fmt.Fprintf(&b, "  hold-ended %s s%d owner-key=%q token=%d\n", h.GetLock(), h.GetSessionId(), h.GetOwnerKey(), h.GetToken())
	}
	for _, h := range r.GetHoldsRevoked() {
		fmt.Fprintf(&b, "  hold-revoked %s s%d owner-key=%q token=%d from=%d grace=%v deadline=%ds\n", h.GetLock(), h.GetSessionId(),
			h.GetOwnerKey(), h.GetToken(), h.GetRevokeFrom(), time.Duration(h.GetGraceNanos()), h.GetDeadlineUnixNano()/int64(time.Second))
	}
	// What the leader's liveness tracker reads.
	lv := r.GetLiveness()
	if o := lv.GetSessionOpened(); o != nil {
		fmt.Fprintf(&b, "  session-opened %d ttl=%v", o.GetSessionId(), time.Duration(o.GetTtlNanos()))
		if h := o.GetSecretHash(); len(h) > 0 {
			fmt.Fprintf(&b, " secret-hash=%x…", h[:4])
		}
		b.WriteString("\n")
	}
	if id := lv.GetSessionBlacklisted(); id != 0 {
		fmt.Fprintf(&b, "  session-blacklisted %d\n", id)
	}
	if w := lv.GetWaitQueued(); w != nil {
		fmt.Fprintf(&b, "  wait-queued %s s%d seq=%d timeout=%v\n", w.GetLock(), w.GetSessionId(), w.GetAcquireSeq(), time.Duration(w.GetWaitTimeoutNanos()))
	}
	for _, h := range lv.GetLimitedHoldsGranted() {
		fmt.Fprintf(&b, "  limited-hold-granted %s\n", formatLimitedHold(h))
	}
	if h := lv.GetLimitedHoldReleased(); h != nil {
		fmt.Fprintf(&b, "  limited-hold-released %s\n", formatLimitedHold(h))
	}
	for _, d := range lv.GetLockDelaysStarted() {
		fmt.Fprintf(&b, "  lock-delay-started %s from=%d delay=%v\n", d.GetLock(), d.GetDelayFrom(), time.Duration(d.GetDelayNanos()))
	}
	for _, h := range lv.GetRevocationsEnded() {
		fmt.Fprintf(&b, "  revocation-ended %s s%d owner-key=%q token=%d from=%d\n", h.GetLock(), h.GetSessionId(), h.GetOwnerKey(), h.GetToken(), h.GetRevokeFrom())
	}
	if d := lv.GetLockDelayEnded(); d != nil {
		fmt.Fprintf(&b, "  lock-delay-ended %s from=%d delay=%v\n", d.GetLock(), d.GetDelayFrom(), time.Duration(d.GetDelayNanos()))
	}
	return b.String()
}

func formatLimitedHold(h *fsmpb.LimitedHold) string {
	key := ""
	if h.GetOwnerKey() != "" {
		key = fmt.Sprintf(" key=%q", h.GetOwnerKey())
	}
	return fmt.Sprintf("%s s%d%s token=%d%s", h.GetLock(), h.GetSessionId(), key, h.GetToken(), holdLimitMark(h.GetHoldLimitNanos()))
}

func formatOutcome(o *fsmpb.AcquireOutcome) string {
	s := fmt.Sprintf("%s %s", o.GetLock(), strings.TrimPrefix(o.GetStatus().String(), "ACQUIRE_STATUS_"))
	switch o.GetStatus() {
	case fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED:
		s += fmt.Sprintf(" token=%d count=%d", o.GetToken(), o.GetCount())
	case fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED:
		s += fmt.Sprintf(" position=%d", o.GetPosition())
	}
	if o.GetHolder() != nil {
		s += " holder=" + formatHolder(o.GetHolder())
	}
	if u := o.GetDelayedUntilUnixNano(); u != 0 {
		s += fmt.Sprintf(" lock-delay-until=%ds", u/int64(time.Second))
	}
	return s
}

func formatHolder(h *fsmpb.Holder) string {
	return fmt.Sprintf("s%d/%q token=%d count=%d seq=%d since=%ds owner=%q%s", h.GetSessionId(), h.GetOwnerKey(),
		h.GetToken(), h.GetCount(), h.GetAcquireSeq(), h.GetSinceUnixNano()/int64(time.Second), h.GetOwner(),
		sharedMark(h.GetShared())) + holdLimitMark(h.GetHoldLimitNanos()) + lockDelayMark(h.GetLockDelayNanos()) + revokeMark(h) +
		valueMark(h.GetValue())
}

func revokeMark(h *fsmpb.Holder) string {
	if h.GetRevokeFrom() == 0 {
		return ""
	}
	return fmt.Sprintf(" revoked-by=%d grace=%v deadline=%ds", h.GetRevokeFrom(), time.Duration(h.GetRevokeGraceNanos()),
		h.GetRevokeDeadlineUnixNano()/int64(time.Second))
}

func valueMark(v string) string {
	if v == "" {
		return ""
	}
	return fmt.Sprintf(" value=%q", v)
}

func lockDelayMark(nanos int64) string {
	if nanos == 0 {
		return ""
	}
	return " lock-delay=" + time.Duration(nanos).String()
}

func holdLimitMark(nanos int64) string {
	if nanos == 0 {
		return ""
	}
	return " hold-limit=" + time.Duration(nanos).String()
}

func grantMarks(g *fsmpb.Grant) string {
	return sharedMark(g.GetShared()) + map[bool]string{true: " reentry"}[g.GetReentry()]
}

func sharedMark(shared bool) string {
	if shared {
		return " shared"
	}
	return ""
}

func (h *harness) state() string {
	var b strings.Builder
	fmt.Fprintf(&b, "applied %d\n", h.m.AppliedIndex())
	for _, s := range h.m.Sessions(0, 0) {
		fmt.Fprintf(&b, "session %d owner=%q ttl=%v created=%ds min-unacked=%d holds=%d", s.GetId(), s.GetOwner(),
			time.Duration(s.GetTtlNanos()), s.GetCreatedUnixNano()/int64(time.Second), s.GetMinUnackedSeq(), s.GetHolds())
		if s.GetBlacklisted() {
			b.WriteString(" blacklisted")
		}
		if n := s.GetOpenNonce(); n != 0 {
			fmt.Fprintf(&b, " nonce=%d", n)
		}
		if h := s.GetSecretHash(); len(h) > 0 {
			fmt.Fprintf(&b, " secret=%x…", h[:4])
		}
		b.WriteString("\n")
		for _, c := range h.m.sessions[s.GetId()].results {
			claimed := ""
			if c.claimed {
				claimed = " claimed"
			}
			fmt.Fprintf(&b, "  cached seq=%d%s: %s", c.seq, claimed, indent(formatResult(c.toProto(nil))))
		}
	}
	for _, l := range h.m.Locks("", "", 0) {
		if l.GetLimit() != 0 {
			fmt.Fprintf(&b, "lock %s limit=%d\n", l.GetName(), l.GetLimit())
		} else {
			fmt.Fprintf(&b, "lock %s\n", l.GetName())
		}
		if l.GetDelayFrom() != 0 {
			fmt.Fprintf(&b, "  lock-delay from=%d delay=%v until=%ds\n", l.GetDelayFrom(), time.Duration(l.GetDelayNanos()),
				l.GetDelayedUntilUnixNano()/int64(time.Second))
		}
		for _, x := range l.GetHolders() {
			fmt.Fprintf(&b, "  holder %s\n", formatHolder(x))
		}
		for i, w := range l.GetWaiters() {
			fmt.Fprintf(&b, "  waiter %d: s%d/%q seq=%d timeout=%v since=%ds%s\n", i+1, w.GetSessionId(), w.GetOwnerKey(),
				w.GetAcquireSeq(), time.Duration(w.GetWaitTimeoutNanos()), w.GetSinceUnixNano()/int64(time.Second),
				sharedMark(w.GetShared())+holdLimitMark(w.GetHoldLimitNanos())+lockDelayMark(w.GetLockDelayNanos())+valueMark(w.GetValue()))
		}
	}
	return b.String()
}

// indent indents every line of s but the first by four more spaces.
func indent(s string) string {
	return strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n    ") + "\n"
}
