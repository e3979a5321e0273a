package fsm

import "github.com/batonlock/baton/internal/fsm/fsmpb"

// Seq fences: settling a request's sequence number in the log before
// refusing it outside the log.
//
// A leader refuses some requests before proposing them (a log version too
// old for what they carry, a data dir nearly full). Such a refusal is not
// in the log, so on its own it cannot be final: an earlier attempt of the
// same (session, seq), delayed on another connection, may still be
// proposed and applied after the client was told "refused", granting a
// hold its client does not know about. So the leader first proposes a
// fence: a CancelWait of the session for its own acquire seq, under that
// very seq. Every release applies it alike, from log version 1:
//
//   - if an earlier attempt already applied, the fence is answered from
//     the exactly-once cache with that attempt's result and changes
//     nothing (FenceFoundAnswer): the client is told to retry, and its
//     retry is answered from the cache;
//   - otherwise no waiter can have that acquire seq (a wait of it would
//     have cached a result), so the fence changes nothing but caches
//     NOT_WAITING under the seq (FenceSettled), and the refusal is final:
//     any later attempt of the request has no effect and is answered
//     ERROR_REFUSED from that cached answer (a retry of the fence itself
//     gets the NOT_WAITING again).

// SeqFence returns the fence for cmd, a session's Acquire, AcquireMany or
// Proclaim with a sequence number, or nil when cmd has no sequence to
// settle or names no valid lock.
func SeqFence(cmd *fsmpb.Command) *fsmpb.Command {
	if cmd.GetSessionId() == 0 || cmd.GetSeq() == 0 {
		return nil
	}
	var lock string
	switch op := cmd.GetOp().(type) {
	case *fsmpb.Command_Acquire:
		lock = op.Acquire.GetLock()
	case *fsmpb.Command_AcquireMany:
		if len(op.AcquireMany.GetLocks()) > 0 {
			lock = op.AcquireMany.GetLocks()[0]
		}
	case *fsmpb.Command_Proclaim:
		lock = op.Proclaim.GetLock()
	default:
		return nil
	}
	if checkLockName(lock) != nil {
		return nil
	}
	return &fsmpb.Command{
		SessionId:        cmd.GetSessionId(),
		Seq:              cmd.GetSeq(),
		MinUnackedSeq:    cmd.GetMinUnackedSeq(),
		WallTimeUnixNano: cmd.GetWallTimeUnixNano(),
		SecretHash:       cmd.GetSecretHash(),
		Principal:        cmd.GetPrincipal(),
		Op: &fsmpb.Command_CancelWait{CancelWait: &fsmpb.CancelWait{
			Lock:       lock,
			SessionId:  cmd.GetSessionId(),
			AcquireSeq: cmd.GetSeq(),
		}},
	}
}

// FenceVerdict is what a fence's result says about the refusal it was
// proposed for.
type FenceVerdict int

const (
	// FenceSettled: the fence cached its own NOT_WAITING under the
	// sequence; the refusal is final.
	FenceSettled FenceVerdict = iota
	// FenceFoundAnswer: an earlier attempt applied first and the fence got
	// its cached outcome. The client retries and is answered from the
	// cache, as any retry is (which also claims an acquire's answer).
	FenceFoundAnswer
	// FenceRefused: the log refused the sequence itself (stale, a session
	// gone or not the caller's, a full window), or an earlier attempt was
	// refused and cached that: the result is the answer.
	FenceRefused
)

// FenceOutcome reads res, the result of a SeqFence. An Acquire's,
// AcquireMany's or Proclaim's result is never NOT_WAITING, so a
// NOT_WAITING without an outcome is the fence's own.
func FenceOutcome(res *fsmpb.Result) FenceVerdict {
	outcome := res.GetAcquire() != nil || len(res.GetAcquireMany()) > 0
	switch {
	case outcome || res.GetError() == fsmpb.Error_ERROR_NONE:
		return FenceFoundAnswer
	case res.GetError() == fsmpb.Error_ERROR_NOT_WAITING:
		return FenceSettled
	default:
		return FenceRefused
	}
}

// fenced reports whether c is a fence's answer: NOT_WAITING without the
// hold a cancel that lost to a grant reports. An Acquire's, AcquireMany's
// or Proclaim's own answer never is.
func (c *cachedResult) fenced() bool {
	return c.code == fsmpb.Error_ERROR_NOT_WAITING && c.acquire == nil && len(c.many) == 0
}
