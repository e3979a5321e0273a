package sim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// linInput is one operation of the lock API as the model sees it.
type linInput struct {
	kind    opKind
	session uint64
	key     string // the owner key (Config.Keys): acquires, releases, proclaims, expire-holds, abandons
	seq     uint64 // client operations: the request's seq
	lock    string
	token   uint64 // release, check, proclaim
	shared  bool   // acquires of a semaphore: a permit (else exclusive)
	value   string // acquires of a mutex, proclaims: the hold's value
}

// linState is the sequential model of one lock: its holder (a session and
// an owner key: the same session under another key is another owner),
// token (token 0 = granted by an operation whose outcome the client never
// learnt) and reentrant count, the highest token known granted, and the
// sessions known ended. A semaphore's holds are in holds instead of
// holder and token (see semStep); clients never re-enter those. value is
// the mutex holder's value: its acquire's, or the last it proclaimed
// (known even when the acquire's outcome is not: it is the request's).
type linState struct {
	holder, token, last uint64
	holderKey           string
	count               uint32 // the holder's reentrant count, >= 1 while held
	// untold counts the counts of the hold granted by acquires whose
	// outcome their client never learnt: an abandon may release one of
	// those only (abandonStep).
	untold uint32
	holds  string // semaphores: sorted "session/key/token/mode" by ","
	dead   string // sorted, comma separated session ids
	value  string
}

// heldBy reports whether in's owner, (session, owner key), holds the
// mutex.
func (st linState) heldBy(in linInput) bool {
	return st.holder != 0 && st.holder == in.session && st.holderKey == in.key
}

// names reports whether in names the mutex's hold: by its owner and its
// token, if the model knows it (else any token). An EndRevokedHold names
// the session and token only: a mutex has one holder.
func (st linState) names(in linInput) bool {
	return st.holder == in.session && (st.holderKey == in.key || in.kind == opEndRevoked) && (st.token == 0 || st.token == in.token)
}

// namesKnown is names for a hold whose token the model knows is in's.
func (st linState) namesKnown(in linInput) bool {
	return st.names(in) && st.token == in.token
}

// released is st after its holder gave up one count of its hold (told
// the hold's token, if the model did not know it).
func (st linState) released(token uint64) linState {
	if st.count <= 1 {
		return st.ended()
	}
	st.count--
	if st.token == 0 {
		st.token = token
	}
	return st
}

func (st linState) isDead(s uint64) bool {
	return slices.Contains(strings.Split(st.dead, ","), strconv.FormatUint(s, 10))
}

func (st linState) kill(s uint64) linState {
	if st.isDead(s) {
		return st
	}
	var ids []uint64
	for _, f := range strings.Split(st.dead, ",") {
		if f != "" {
			n, _ := strconv.ParseUint(f, 10, 64)
			ids = append(ids, n)
		}
	}
	ids = append(ids, s)
	slices.Sort(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatUint(id, 10)
	}
	st.dead = strings.Join(parts, ",")
	if st.holder == s {
		st = st.ended()
	}
	if st.holds != "" {
		st = st.withHolds(slices.DeleteFunc(st.semHolds(), func(h semHold) bool { return h.session == s }))
	}
	return st
}

// effect is the state after in took effect with an unknown output.
func effects(st linState, in linInput) []any {
	out := []any{st}
	switch in.kind {
	case opAcquireTry, opAcquireWait:
		switch {
		case st.isDead(in.session):
		case st.holder == 0:
			out = append(out, linState{holder: in.session, holderKey: in.key, count: 1, untold: 1, last: st.last, dead: st.dead, value: in.value})
		case st.heldBy(in):
			n := st // another count of its hold
			n.count++
			n.untold++
			out = append(out, n)
		}
	case opRelease:
		if st.names(in) {
			out = append(out, st.released(in.token))
		}
	case opExpireHold, opEndRevoked:
		// An expiry of a hold limit, or the end of a revoked hold whose
		// grace passed, ends the hold it names, every count.
		if st.names(in) {
			out = append(out, st.ended())
		}
	case opProclaim:
		if st.names(in) {
			n := st
			n.value = in.value
			out = append(out, n)
		}
	case opClose, opExpire:
		out = append(out, st.kill(in.session))

	case opAbandon:
		// It may have released a count of the hold the abandoned acquire
		// got, if the client was never told that grant (see
		// abandonStep).
		if st.heldBy(in) && st.untold > 0 {
			out = append(out, st.releasedUntold())
		}
	}
	return out
}

// abandonStep is the step of a known abandon outcome: a released grant
// (o.granted, with its token and the count left) or no effect. A grant
// a client was told is the client's: an abandon must never release it (a
// retry told GRANTED claims the request), so only a count granted by an
// acquire whose outcome its client never learnt may go (st.untold). The
// hold's token may be known all the same: another acquire of the owner
// re-entered it (two workers under one key, Config.Keys).
func abandonStep(st linState, in linInput, o outcome) []any {
	if !o.granted {
		return []any{st} // left the lock alone: dequeued, claimed or refused
	}
	if !st.heldBy(in) || st.untold == 0 || o.remaining != st.count-1 {
		return nil
	}
	return []any{st.releasedUntold()}
}

// releasedUntold is st after an abandon released one of its untold
// counts.
func (st linState) releasedUntold() linState {
	st = st.released(0)
	if st.untold > 0 {
		st.untold--
	}
	return st
}

// ended is st with no holder: a hold ended whatever its count.
func (st linState) ended() linState {
	st.holder, st.holderKey, st.token, st.count, st.untold, st.value = 0, "", 0, 0, 0, ""
	return st
}

func lockStep(state, input, output any) []any {
	st, in, o := state.(linState), input.(linInput), output.(outcome)
	if isSemaphore(in.lock) {
		return semStep(st, in, o)
	}
	if o.unknown {
		return effects(st, in)
	}
	if in.kind == opAbandon {
		return abandonStep(st, in, o)
	}
	if o.code == fsmpb.Error_ERROR_SESSION_NOT_FOUND {
		return sessionNotFoundStep(st, in, o, effects)
	}
	switch in.kind {
	case opAcquireTry, opAcquireWait:
		switch {
		case o.noSpace:
			// Refused NO_SPACE by a leader low on disk: no effect, even
			// after an attempt whose outcome was unknown (its seq fence
			// settled the seq first; check k).
			return []any{st}
		case o.granted && st.isDead(in.session):
			return nil
		case o.granted && st.holder == 0:
			// A new hold (count 0: a wait's grant pushed without it).
			if o.token > st.last && o.count <= 1 {
				return []any{linState{holder: in.session, holderKey: in.key, token: o.token, count: 1, last: o.token, dead: st.dead, value: in.value}}
			}
			return nil
		case o.granted && st.heldBy(in):
			// Another count of the owner's hold, with its token: once
			// per acquire, however often retried. (The session's hold
			// under another key is another owner's: no grant beside it.)
			if (st.token == o.token || st.token == 0 && o.token > st.last) && (o.count == st.count+1 || o.count == 0) {
				n := st
				n.token, n.count, n.last = o.token, st.count+1, max(st.last, o.token)
				return []any{n}
			}
			return nil
		case o.granted:
			return nil
		case o.busy:
			// Another owner's hold (another session's, or the same
			// session's under another key), or a lock-delay (check
			// h/lock-delay holds the log to it): the model does not
			// follow delays.
			if st.holder != 0 && !st.heldBy(in) || o.delayed && !st.heldBy(in) {
				return []any{st}
			}
			return nil
		case o.code == fsmpb.Error_ERROR_DEADLOCK:
			// Refused as a deadlock, at the acquire or ended at a grant
			// or cancel (checker i holds the log to it): the lock was
			// held, by another owner; or, for a wait, by its own: of two
			// waits of one owner for the lock (two workers under one
			// key, Config.Keys), one that could not re-enter the hold
			// the other was granted (another hold limit) is ended as
			// deadlocked behind it (log version 14). An acquire made
			// while its owner holds the lock re-enters it.
			if st.holder != 0 && (!st.heldBy(in) || in.kind == opAcquireWait) {
				return []any{st}
			}
			return nil
		case o.ambiguous, o.code == fsmpb.Error_ERROR_NOT_HOLDER:
			// NOT_HOLDER: a retry learnt that the hold an earlier
			// attempt got has ended since.
			return effects(st, in)
		case o.retried && o.code == fsmpb.Error_ERROR_WAIT_CANCELLED:
			// A retry may learn WAIT_CANCELLED from the cache after an
			// abandon released the grant an earlier attempt got (both in
			// the abandon's one entry).
			return effects(st, in)
		default: // timed out, cancelled, refused: no effect
			return []any{st}
		}
	case opRelease, opExpireHold, opEndRevoked:
		mine := st.names(in)
		switch {
		case o.code != fsmpb.Error_ERROR_NONE:
		case !mine:
			return nil
		case in.kind == opExpireHold || in.kind == opEndRevoked:
			return []any{st.ended()}
		case o.remaining == st.count-1:
			return []any{st.released(in.token)}
		default:
			return nil // a count gained or lost somewhere
		}
		if st.namesKnown(in) {
			return nil // refused its own hold
		}
		return []any{st}
	case opProclaim:
		mine := st.names(in)
		switch {
		case o.code == fsmpb.Error_ERROR_NONE && mine:
			n := st
			n.value = in.value
			if n.token == 0 {
				n.token = in.token // its token, now known
			}
			return []any{n}
		case o.code == fsmpb.Error_ERROR_NONE:
			return nil // set the value of a hold it does not have
		case o.code == fsmpb.Error_ERROR_INVALID_ARGUMENT, o.code == fsmpb.Error_ERROR_REFUSED:
			// Refused before the log (a log version below values), or
			// a retry of that refusal.
			return []any{st}
		case st.namesKnown(in):
			return nil // refused its own hold
		}
		return []any{st}
	case opCheck:
		// A check reads the holder's value too: the model's, whatever
		// it knows of the token.
		if o.value != st.value {
			return nil
		}
		if st.holder != 0 && st.token == 0 {
			return []any{st} // granted with a token nobody learnt
		}
		if o.held == (st.holder != 0 && in.token != 0 && st.token == in.token) {
			return []any{st}
		}
		return nil
	case opClose, opExpire:
		return sessionEndStep(st, in, o)
	}
	return []any{st}
}

// sessionNotFoundStep is the step of any operation answered
// SESSION_NOT_FOUND, for either kind of lock (effects is the kind's).
func sessionNotFoundStep(st linState, in linInput, o outcome, effects func(linState, linInput) []any) []any {
	switch {
	case in.kind == opClose:
		// A retried close finds the session its first attempt closed.
		return []any{st.kill(in.session)}
	case o.retried || o.ambiguous:
		// An earlier attempt may have taken effect before the session
		// ended; or, for a wait the client was cancelling (ambiguous),
		// it may have been granted and the hold gone with the session
		// before the cancel arrived.
		return effects(st, in)
	case st.isDead(in.session):
		return []any{st}
	}
	return nil
}

// sessionEndStep is the step of a close or expiry known to have applied
// or failed, for either kind of lock.
func sessionEndStep(st linState, in linInput, o outcome) []any {
	if o.code == fsmpb.Error_ERROR_NONE && !st.isDead(in.session) {
		return []any{st.kill(in.session)}
	}
	return nil
}

// semHold is one hold of a semaphore in the model, by (session, owner
// key): token 0 was granted by an operation whose outcome its client
// never learnt.
type semHold struct {
	session uint64
	key     string
	token   uint64
	shared  bool
}

// named reports whether in names h's owner (an EndRevokedHold names no
// key: any of the session's holds with its token).
func (h semHold) named(in linInput) bool {
	return h.session == in.session && (h.key == in.key || in.kind == opEndRevoked)
}

func (st linState) semHolds() []semHold {
	if st.holds == "" {
		return nil
	}
	var out []semHold
	for _, f := range strings.Split(st.holds, ",") {
		p := strings.Split(f, "/")
		sess, _ := strconv.ParseUint(p[0], 10, 64)
		tok, _ := strconv.ParseUint(p[2], 10, 64)
		out = append(out, semHold{sess, p[1], tok, p[3] == "s"})
	}
	return out
}

// withHolds is st with holds hs, in a canonical order (states compare
// equal when their holds do).
func (st linState) withHolds(hs []semHold) linState {
	hs = slices.Clone(hs)
	slices.SortFunc(hs, func(a, b semHold) int {
		if a.session != b.session {
			return cmpU(a.session, b.session)
		}
		if a.key != b.key {
			return strings.Compare(a.key, b.key)
		}
		return cmpU(a.token, b.token)
	})
	parts := make([]string, len(hs))
	for i, h := range hs {
		mode := "x"
		if h.shared {
			mode = "s"
		}
		parts[i] = fmt.Sprintf("%d/%s/%d/%s", h.session, h.key, h.token, mode)
	}
	st.holds = strings.Join(parts, ",")
	return st
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// semAdmits: a new hold in this mode fits beside hs (DESIGN.md 5.1: at
// most the limit, never an exclusive hold beside another). A lock that
// admits it may still make it wait behind a queued waiter (FIFO); the model
// does not follow waiters, so it never requires a grant.
func semAdmits(hs []semHold, shared bool) bool {
	if len(hs) >= SemaphorePermits || !shared && len(hs) > 0 {
		return false
	}
	for _, h := range hs {
		if !h.shared {
			return false
		}
	}
	return true
}

// semEffects is semStep's effects: the states after in took effect with an
// unknown output.
func semEffects(st linState, in linInput) []any {
	out := []any{st}
	hs := st.semHolds()
	switch in.kind {
	case opAcquireTry, opAcquireWait:
		if !st.isDead(in.session) && !slices.ContainsFunc(hs, func(h semHold) bool { return h.named(in) }) && semAdmits(hs, in.shared) {
			out = append(out, st.withHolds(append(hs, semHold{in.session, in.key, 0, in.shared})))
		}
	case opRelease, opExpireHold, opEndRevoked:
		for i, h := range hs {
			if h.named(in) && (h.token == 0 || h.token == in.token) {
				out = append(out, st.withHolds(slices.Delete(slices.Clone(hs), i, i+1)))
			}
		}
	case opClose, opExpire:
		out = append(out, st.kill(in.session))
	case opAbandon:
		for i, h := range hs {
			if h.named(in) && h.token == 0 {
				out = append(out, st.withHolds(slices.Delete(slices.Clone(hs), i, i+1)))
			}
		}
	}
	return out
}

// semStep is lockStep for a semaphore (or read/write lock) of
// SemaphorePermits holders: the same rules as a mutex's, over a set of
// holds. An owner (session, key) holds a semaphore at most once (clients
// never acquire what they hold); a session may hold it under two keys.
// Holds granted by one entry share its index as token, so tokens known
// granted must not decrease, rather than increase.
func semStep(st linState, in linInput, o outcome) []any {
	if o.unknown {
		return semEffects(st, in)
	}
	hs := st.semHolds()
	mine := -1 // the owner's hold: its token, or one nobody learnt
	for i, h := range hs {
		if h.named(in) && (h.token == 0 || h.token == in.token || in.kind == opAcquireTry || in.kind == opAcquireWait) {
			mine = i
		}
	}
	if in.kind == opAbandon {
		switch {
		case !o.granted:
			return []any{st}
		case mine < 0 || hs[mine].token != 0:
			return nil
		case o.remaining > 0:
			return []any{st}
		}
		return []any{st.withHolds(slices.Delete(hs, mine, mine+1))}
	}
	if o.code == fsmpb.Error_ERROR_SESSION_NOT_FOUND {
		return sessionNotFoundStep(st, in, o, semEffects)
	}
	switch in.kind {
	case opAcquireTry, opAcquireWait:
		switch {
		case o.noSpace:
			return []any{st} // as for a mutex
		case o.granted:
			if mine < 0 && !st.isDead(in.session) && semAdmits(hs, in.shared) && o.token >= st.last {
				n := st.withHolds(append(hs, semHold{in.session, in.key, o.token, in.shared}))
				n.last = o.token
				return []any{n}
			}
			return nil
		case o.busy:
			if o.delayed || slices.ContainsFunc(hs, func(h semHold) bool { return !h.named(in) }) {
				return []any{st}
			}
			return nil
		case o.code == fsmpb.Error_ERROR_DEADLOCK:
			// As for a mutex: another owner held it.
			if slices.ContainsFunc(hs, func(h semHold) bool { return !h.named(in) }) {
				return []any{st}
			}
			return nil
		case o.ambiguous, o.code == fsmpb.Error_ERROR_NOT_HOLDER:
			return semEffects(st, in)
		case o.retried && o.code == fsmpb.Error_ERROR_WAIT_CANCELLED:
			return semEffects(st, in)
		default:
			return []any{st}
		}
	case opRelease, opExpireHold, opEndRevoked:
		if o.code == fsmpb.Error_ERROR_NONE {
			var out []any
			for i, h := range hs {
				if h.named(in) && (h.token == 0 || h.token == in.token) {
					out = append(out, st.withHolds(slices.Delete(slices.Clone(hs), i, i+1)))
				}
			}
			return out
		}
		if slices.ContainsFunc(hs, func(h semHold) bool { return h.named(in) && h.token == in.token }) {
			return nil // refused its own hold
		}
		return []any{st}
	case opCheck:
		if slices.ContainsFunc(hs, func(h semHold) bool { return h.token == 0 }) {
			return []any{st}
		}
		held := in.token != 0 && slices.ContainsFunc(hs, func(h semHold) bool { return h.token == in.token })
		if o.held == held {
			return []any{st}
		}
		return nil
	case opClose, opExpire:
		return sessionEndStep(st, in, o)
	}
	return []any{st}
}

// partition splits the history per lock; a session's close and expiry go
// to every lock that session used, named as that lock's (so the step knows
// the lock's kind).
func partition(history []porcupine.Operation) [][]porcupine.Operation {
	byLock := map[string][]porcupine.Operation{}
	used := map[uint64][]string{}
	var ends []porcupine.Operation
	for _, op := range history {
		in := op.Input.(linInput)
		if in.lock == "" {
			ends = append(ends, op)
			continue
		}
		byLock[in.lock] = append(byLock[in.lock], op)
		if !slices.Contains(used[in.session], in.lock) {
			used[in.session] = append(used[in.session], in.lock)
		}
	}
	for _, op := range ends {
		for _, l := range used[op.Input.(linInput).session] {
			in := op.Input.(linInput)
			in.lock = l
			op.Input = in
			byLock[l] = append(byLock[l], op)
		}
	}
	var out [][]porcupine.Operation
	for _, l := range sortedKeys(byLock) {
		out = append(out, byLock[l])
	}
	return out
}

var lockModel = (&porcupine.NondeterministicModel{
	Init:      func() []any { return []any{linState{}} },
	Step:      lockStep,
	Partition: partition,
	DescribeOperation: func(input, output any) string {
		in, o := input.(linInput), output.(outcome)
		return fmt.Sprintf("%v s%d/%q %s t%d %q -> %+v", in.kind, in.session, in.key, in.lock, in.token, in.value, o)
	},
	DescribeState: func(state any) string { return fmt.Sprintf("%+v", state.(linState)) },
}).ToModel()
