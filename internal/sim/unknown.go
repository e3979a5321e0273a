package sim

import "github.com/batonlock/baton/internal/fsm/fsmpb"

// Acquires whose outcome their client never learnt. The model lets such
// an acquire take effect at any time after its call, which porcupine pays
// for dearly: a dozen open to the end on one busy lock (several workers
// of each session waiting, Config.Keys) cost it seconds. Yet whether it
// took effect is in the log: an acquire (session, seq) holds a lock only
// if the entry that first applied it granted the lock at once, or a later
// entry granted its wait (the grant names (session, seq)). One that the
// log never granted took no effect, as the identity step of its unknown
// outcome says; leaving it out of the history spares the search, and
// checks nothing less. A granted one stays open: the model decides when
// it took effect (an abandon may have released the grant since).

// grantKey names a lock an acquire (session, seq) may have been granted.
type grantKey struct {
	session, seq uint64
	lock         string
}

// grantedAcquires is every (session, seq, lock) the log granted: at the
// entry that first applied the acquire or acquire_many, or at the grant
// of its wait.
func (k *checker) grantedAcquires() map[grantKey]bool {
	granted := map[grantKey]bool{}
	applied := map[sessionSeq]bool{}
	for _, i := range sortedKeys(k.log) {
		e := k.log[i]
		for _, g := range e.res.GetGrants() {
			granted[grantKey{g.GetSessionId(), g.GetAcquireSeq(), g.GetLock()}] = true
		}
		ss := sessionSeq{e.cmd.GetSessionId(), e.cmd.GetSeq()}
		if ss.session == 0 || ss.seq == 0 || applied[ss] || e.cmd.GetAcquire() == nil && e.cmd.GetAcquireMany() == nil {
			continue
		}
		applied[ss] = true // later entries of the seq are answered from the cache
		if a := e.res.GetAcquire(); a.GetStatus() == fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED {
			granted[grantKey{ss.session, ss.seq, e.cmd.GetAcquire().GetLock()}] = true
		}
		for _, o := range e.res.GetAcquireMany() {
			if o.GetStatus() == fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED {
				granted[grantKey{ss.session, ss.seq, o.GetLock()}] = true
			}
		}
	}
	return granted
}

// neverGranted reports whether in, an operation of the history with
// outcome o, is an acquire whose outcome its client never learnt and
// that the log never granted (granted is grantedAcquires').
func neverGranted(in linInput, o outcome, granted map[grantKey]bool) bool {
	return o.unknown && (in.kind == opAcquireTry || in.kind == opAcquireWait) && in.seq != 0 &&
		!granted[grantKey{in.session, in.seq, in.lock}]
}
