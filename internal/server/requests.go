package server

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// reasonOfFSM maps a state-machine error to the wire Reason. The two enums
// share their numbers for values up to 13 on purpose; later ones are mapped
// by hand (TestReasonsMatch checks every name).
func reasonOfFSM(e fsmpb.Error) batonpb.Reason {
	switch {
	case e == fsmpb.Error_ERROR_NONE:
		return batonpb.Reason_REASON_UNSPECIFIED
	case e == fsmpb.Error_ERROR_LIMIT_MISMATCH:
		// After the server's own reasons (14-17) on the wire.
		return batonpb.Reason_LIMIT_MISMATCH
	case e == fsmpb.Error_ERROR_SECRET_MISMATCH:
		return batonpb.Reason_SECRET_MISMATCH
	case e == fsmpb.Error_ERROR_NOT_PERMITTED:
		return batonpb.Reason_NOT_PERMITTED
	case e == fsmpb.Error_ERROR_DEADLOCK:
		return batonpb.Reason_DEADLOCK
	case e == fsmpb.Error_ERROR_REFUSED:
		// A retry of a refusal before the log, which carries no Reason
		// either (a log version too old): FAILED_PRECONDITION and the
		// message.
		return batonpb.Reason_REASON_UNSPECIFIED
	}
	return batonpb.Reason(e)
}

func checkHeader(h *batonpb.RequestHeader) error {
	switch {
	case h == nil:
		return invalidf("header is required (session_id and seq)")
	case h.GetSessionId() == 0:
		return invalidf("header.session_id is required")
	case h.GetSeq() == 0:
		return invalidf("header.seq must be >= 1")
	case h.GetMinUnackedSeq() > h.GetSeq():
		return invalidf("header.min_unacked_seq (%d) is above seq (%d)", h.GetMinUnackedSeq(), h.GetSeq())
	}
	return nil
}

func stamp(h *batonpb.RequestHeader, cmd *fsmpb.Command) *fsmpb.Command {
	cmd.SessionId = h.GetSessionId()
	cmd.Seq = h.GetSeq()
	cmd.MinUnackedSeq = h.GetMinUnackedSeq()
	if cmd.MinUnackedSeq == 0 {
		cmd.MinUnackedSeq = h.GetSeq()
	}
	return cmd
}

// invalidField refuses a request whose field broke a rule of package
// rules (nil for nil), naming the field as the API spells it before the
// rule's own words.
func invalidField(field string, err error) error {
	if err == nil {
		return nil
	}
	return invalidf("%s: %s", field, err)
}

func checkName(field, name string) error { return invalidField(field, rules.CheckLockName(name)) }

func checkOwnerKey(key string) error { return invalidField("owner_key", rules.CheckOwnerKey(key)) }

// openCommand validates an open and returns its command and the session's
// secret: the client's, or one drawn here.
func openCommand(r *batonpb.OpenSessionRequest) (*fsmpb.Command, string, error) {
	ttl := rules.DefaultTTL
	if r.GetTtl() != nil {
		if err := r.GetTtl().CheckValid(); err != nil {
			return nil, "", invalidf("ttl: %v", err)
		}
		ttl = r.GetTtl().AsDuration()
	}
	if err := invalidField("ttl", rules.CheckTTL(ttl)); err != nil {
		return nil, "", err
	}
	if err := invalidField("owner", rules.CheckOwner(r.GetOwner())); err != nil {
		return nil, "", err
	}
	secret := r.GetSecret()
	if secret == "" {
		secret = NewSecret()
	} else if err := rules.CheckSecret(secret); err != nil {
		return nil, "", invalidf("%s", err) // the rule names the field
	}
	return &fsmpb.Command{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{
		TtlNanos: int64(ttl), Owner: r.GetOwner(), Nonce: r.GetNonce(), SecretHash: hashSecret(secret),
	}}}, secret, nil
}

func acquireCommand(r *batonpb.AcquireRequest) (*fsmpb.Command, error) {
	if err := checkHeader(r.GetHeader()); err != nil {
		return nil, err
	}
	if err := checkName("name", r.GetName()); err != nil {
		return nil, err
	}
	if err := checkOwnerKey(r.GetOwnerKey()); err != nil {
		return nil, err
	}
	var timeout time.Duration
	if r.GetWaitTimeout() != nil {
		if !r.GetWait() {
			return nil, invalidf("wait_timeout is set but wait is false")
		}
		if err := r.GetWaitTimeout().CheckValid(); err != nil {
			return nil, invalidf("wait_timeout: %v", err)
		}
		timeout = r.GetWaitTimeout().AsDuration()
		if err := invalidField("wait_timeout", rules.CheckWaitTimeout(timeout)); err != nil {
			return nil, err
		}
	}
	if err := invalidField("limit", rules.CheckHolderLimit(r.GetLimit())); err != nil {
		return nil, err
	}
	holdLimit, err := checkHoldLimit(r.GetHoldLimit())
	if err != nil {
		return nil, err
	}
	lockDelay, err := checkLockDelay(r.GetLockDelay())
	if err != nil {
		return nil, err
	}
	if err := invalidField("value", rules.CheckHoldValue(r.GetValue())); err != nil {
		return nil, err
	}
	cmd, op := fsm.NewAcquire()
	op.Value = r.GetValue()
	op.Lock, op.OwnerKey, op.Wait, op.WaitTimeoutNanos = r.GetName(), r.GetOwnerKey(), r.GetWait(), int64(timeout)
	op.Shared, op.Limit, op.HoldLimitNanos, op.LockDelayNanos = r.GetShared(), r.GetLimit(), int64(holdLimit), int64(lockDelay)
	return stamp(r.GetHeader(), cmd), nil
}

// checkHoldLimit validates an acquire's hold_limit (unset: none).
func checkHoldLimit(d *durationpb.Duration) (time.Duration, error) {
	if d == nil {
		return 0, nil
	}
	if err := d.CheckValid(); err != nil {
		return 0, invalidf("hold_limit: %v", err)
	}
	holdLimit := d.AsDuration()
	if holdLimit == 0 {
		return 0, invalidf("hold_limit is 0s: leave it unset for none")
	}
	if err := invalidField("hold_limit", rules.CheckHoldLimit(holdLimit)); err != nil {
		return 0, err
	}
	return holdLimit, nil
}

func acquireManyCommand(r *batonpb.AcquireManyRequest) (*fsmpb.Command, error) {
	if err := checkHeader(r.GetHeader()); err != nil {
		return nil, err
	}
	if err := invalidField("names", rules.CheckLockNames(r.GetNames())); err != nil {
		return nil, err
	}
	if err := checkOwnerKey(r.GetOwnerKey()); err != nil {
		return nil, err
	}
	if err := invalidField("limit", rules.CheckHolderLimit(r.GetLimit())); err != nil {
		return nil, err
	}
	modes, err := setModes(r)
	if err != nil {
		return nil, err
	}
	holdLimit, err := checkHoldLimit(r.GetHoldLimit())
	if err != nil {
		return nil, err
	}
	lockDelay, err := checkLockDelay(r.GetLockDelay())
	if err != nil {
		return nil, err
	}
	return stamp(r.GetHeader(), &fsmpb.Command{Op: &fsmpb.Command_AcquireMany{AcquireMany: &fsmpb.AcquireMany{
		Locks: r.GetNames(), OwnerKey: r.GetOwnerKey(), Shared: r.GetShared(), Limit: r.GetLimit(), All: r.GetAll(),
		HoldLimitNanos: int64(holdLimit), LockDelayNanos: int64(lockDelay), Modes: modes,
	}}}), nil
}

// setModes validates a mixed set's modes (a mode per name, or none) and
// returns them for the log.
func setModes(r *batonpb.AcquireManyRequest) ([]*fsmpb.LockMode, error) {
	in := r.GetModes()
	if err := invalidField("modes", rules.CheckSetModes(len(r.GetNames()), len(in), r.GetShared(), r.GetLimit())); err != nil {
		return nil, err
	}
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]*fsmpb.LockMode, len(in))
	for i, md := range in {
		if err := rules.CheckHolderLimit(md.GetLimit()); err != nil {
			return nil, invalidf("modes[%d] (lock %q): %v", i, r.GetNames()[i], err)
		}
		out[i] = &fsmpb.LockMode{Shared: md.GetShared(), Limit: md.GetLimit()}
	}
	return out, nil
}

func releaseCommand(r *batonpb.ReleaseRequest) (*fsmpb.Command, error) {
	if err := checkHeader(r.GetHeader()); err != nil {
		return nil, err
	}
	if err := checkName("name", r.GetName()); err != nil {
		return nil, err
	}
	if r.GetToken() == 0 {
		return nil, invalidf("token is required: a release names the hold it ends")
	}
	if err := checkOwnerKey(r.GetOwnerKey()); err != nil {
		return nil, err
	}
	cmd, op := fsm.NewRelease()
	op.Lock, op.Token, op.OwnerKey = r.GetName(), r.GetToken(), r.GetOwnerKey()
	return stamp(r.GetHeader(), cmd), nil
}

func cancelCommand(r *batonpb.CancelRequest) (*fsmpb.Command, error) {
	if err := checkHeader(r.GetHeader()); err != nil {
		return nil, err
	}
	if err := checkName("name", r.GetName()); err != nil {
		return nil, err
	}
	if r.GetAcquireSeq() == 0 {
		return nil, invalidf("acquire_seq is required")
	}
	return stamp(r.GetHeader(), &fsmpb.Command{Op: &fsmpb.Command_CancelWait{CancelWait: &fsmpb.CancelWait{
		Lock: r.GetName(), SessionId: r.GetHeader().GetSessionId(), AcquireSeq: r.GetAcquireSeq(),
	}}}), nil
}

func closeCommand(id, seq uint64) (*fsmpb.Command, error) {
	if id == 0 {
		return nil, invalidf("session_id is required")
	}
	return &fsmpb.Command{SessionId: id, Seq: seq, MinUnackedSeq: seq, Op: &fsmpb.Command_CloseSession{CloseSession: &fsmpb.CloseSession{}}}, nil
}

// casReleaseCommand validates an operator's CasRelease and returns its
// command, without its principal.
func casReleaseCommand(r *batonpb.CasReleaseRequest) (*fsmpb.Command, error) {
	if err := checkName("name", r.GetName()); err != nil {
		return nil, err
	}
	if r.GetSessionId() == 0 {
		return nil, invalidf("session_id is required")
	}
	return &fsmpb.Command{Op: &fsmpb.Command_CasRelease{CasRelease: &fsmpb.CasRelease{
		Lock: r.GetName(), SessionId: r.GetSessionId(), Token: r.GetToken(),
	}}}, nil
}

// revokeCommand validates an operator's Revoke and returns its command,
// without its principal: an unset grace is rules.DefaultRevokeGrace.
func revokeCommand(r *batonpb.RevokeRequest) (*fsmpb.Command, error) {
	if err := checkName("name", r.GetName()); err != nil {
		return nil, err
	}
	grace := rules.DefaultRevokeGrace
	if g := r.GetGrace(); g != nil {
		if err := g.CheckValid(); err != nil {
			return nil, invalidf("grace: %v", err)
		}
		grace = g.AsDuration()
	}
	if err := rules.CheckRevokeGrace(grace); err != nil {
		return nil, invalidf("grace: %v", err)
	}
	return &fsmpb.Command{Op: &fsmpb.Command_RevokeHold{RevokeHold: &fsmpb.RevokeHold{
		Lock: r.GetName(), Token: r.GetToken(), GraceNanos: int64(grace),
	}}}, nil
}

// revokedToWire is the API's form of the holds a RevokeHold asked to end.
func revokedToWire(hs []*fsmpb.HoldRevoked) []*batonpb.Holder {
	out := make([]*batonpb.Holder, 0, len(hs))
	for _, h := range hs {
		out = append(out, &batonpb.Holder{SessionId: h.GetSessionId(), OwnerKey: h.GetOwnerKey(), Token: h.GetToken(),
			RevokeDeadline: tsOf(h.GetDeadlineUnixNano()), RevokeGrace: durationOrNil(h.GetGraceNanos())})
	}
	return out
}

// revokeRequested is the push that tells a session of h.
func revokeRequested(name, ownerKey string, token uint64, graceNanos, deadline int64) *batonpb.SessionResponse {
	return &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_RevokeRequested{RevokeRequested: &batonpb.RevokeRequested{
		Name: name, OwnerKey: ownerKey, Token: token, Grace: durationOrNil(graceNanos), Deadline: tsOf(deadline),
	}}}
}

// blacklistCommand validates an operator's Blacklist and returns its
// command, without its principal.
func blacklistCommand(r *batonpb.BlacklistRequest) (*fsmpb.Command, error) {
	if r.GetSessionId() == 0 {
		return nil, invalidf("session_id is required")
	}
	return &fsmpb.Command{Op: &fsmpb.Command_BlacklistSession{BlacklistSession: &fsmpb.BlacklistSession{
		SessionId: r.GetSessionId(),
	}}}, nil
}

// checkRenewHold validates a renewal's hold (its session is the
// stream's, or the unary request's header).
func checkRenewHold(r *batonpb.RenewHoldRequest) error {
	if r.GetToken() == 0 {
		return invalidf("token is required: a renewal names the hold")
	}
	return checkName("name", r.GetName())
}

func holderToWire(h *fsmpb.Holder) *batonpb.Holder {
	if h == nil {
		return nil
	}
	return &batonpb.Holder{
		SessionId: h.GetSessionId(), Owner: h.GetOwner(), OwnerKey: h.GetOwnerKey(),
		Token: h.GetToken(), Count: h.GetCount(), Since: tsOf(h.GetSinceUnixNano()), Shared: h.GetShared(),
		HoldLimit: durationOrNil(h.GetHoldLimitNanos()), LockDelay: durationOrNil(h.GetLockDelayNanos()),
		RevokeDeadline: tsOf(h.GetRevokeDeadlineUnixNano()), RevokeGrace: durationOrNil(h.GetRevokeGraceNanos()),
		Value: h.GetValue(),
	}
}

func durationOrNil(nanos int64) *durationpb.Duration {
	if nanos == 0 {
		return nil
	}
	return durationpb.New(time.Duration(nanos))
}

// limitOf is a lock's holder limit as the API shows it: 1 for a mutex,
// which the log keeps as 0.
func limitOf(l *fsmpb.Lock) uint32 {
	return max(l.GetLimit(), 1)
}

func tsOf(unixNano int64) *timestamppb.Timestamp {
	if unixNano == 0 {
		return nil
	}
	return timestamppb.New(time.Unix(0, unixNano))
}

func acquireToWire(seq uint64, o *fsmpb.AcquireOutcome, lockDelay int64) *batonpb.AcquireResponse {
	r := &batonpb.AcquireResponse{}
	fillAcquireResponse(r, seq, o, lockDelay)
	return r
}

// fillAcquireResponse sets r, a zero AcquireResponse, to the API's form of
// o, the outcome of a request that gave its hold lockDelay.
func fillAcquireResponse(r *batonpb.AcquireResponse, seq uint64, o *fsmpb.AcquireOutcome, lockDelay int64) {
	r.Name, r.Seq, r.Holder = o.GetLock(), seq, holderToWire(o.GetHolder())
	r.DelayedUntil = tsOf(o.GetDelayedUntilUnixNano())
	switch o.GetStatus() {
	case fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED:
		r.Acquired, r.Token, r.Count, r.Holder = true, o.GetToken(), o.GetCount(), nil
		r.LockDelay = durationOrNil(lockDelay)
	case fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED:
		r.Queued, r.Position = true, o.GetPosition()
		r.LockDelay = durationOrNil(lockDelay)
	case fsmpb.AcquireStatus_ACQUIRE_STATUS_SKIPPED:
		r.Skipped = true
	}
}

// lockDelayOf is the lock-delay cmd, an Acquire or AcquireMany, gives its
// holds.
func lockDelayOf(cmd *fsmpb.Command) int64 {
	if op := cmd.GetAcquire(); op != nil {
		return op.GetLockDelayNanos()
	}
	return cmd.GetAcquireMany().GetLockDelayNanos()
}

func lockToWire(l *fsmpb.Lock) *batonpb.Lock {
	out := &batonpb.Lock{Name: l.GetName(), Limit: limitOf(l), DelayedUntil: tsOf(l.GetDelayedUntilUnixNano())}
	for _, h := range l.GetHolders() {
		out.Holders = append(out.Holders, holderToWire(h))
	}
	for _, w := range l.GetWaiters() {
		bw := &batonpb.Waiter{SessionId: w.GetSessionId(), Owner: w.GetOwner(), OwnerKey: w.GetOwnerKey(),
			Since: tsOf(w.GetSinceUnixNano()), Shared: w.GetShared()}
		if w.GetWaitTimeoutNanos() > 0 {
			bw.WaitTimeout = durationpb.New(time.Duration(w.GetWaitTimeoutNanos()))
		}
		out.Waiters = append(out.Waiters, bw)
	}
	return out
}

// holdEnds maps the state machine's HoldEnd to the API's.
var holdEnds = map[fsm.HoldEnd]batonpb.HoldEnd{
	fsm.EndReleased:       batonpb.HoldEnd_HOLD_END_RELEASED,
	fsm.EndSessionClosed:  batonpb.HoldEnd_HOLD_END_SESSION_CLOSED,
	fsm.EndSessionExpired: batonpb.HoldEnd_HOLD_END_SESSION_EXPIRED,
	fsm.EndHoldExpired:    batonpb.HoldEnd_HOLD_END_HOLD_EXPIRED,
	fsm.EndCasReleased:    batonpb.HoldEnd_HOLD_END_CAS_RELEASED,
	fsm.EndAbandoned:      batonpb.HoldEnd_HOLD_END_ABANDONED,
	fsm.EndRevoked:        batonpb.HoldEnd_HOLD_END_REVOKED,
}

// historyToWire is the recent ended holds of lock name, the most recent
// first.
func historyToWire(m *fsm.Machine, name string) []*batonpb.PastHold {
	var out []*batonpb.PastHold
	for _, p := range m.PastHolds(name) {
		out = append(out, pastToWire(p))
	}
	return out
}

func pastToWire(p fsm.PastHold) *batonpb.PastHold {
	return &batonpb.PastHold{
		SessionId: p.SessionID, Owner: p.Owner, OwnerKey: p.OwnerKey, Token: p.Token, Shared: p.Shared,
		Since: tsOf(p.Since), Ended: tsOf(p.Ended), EndedIndex: p.EndedIndex, How: holdEnds[p.How], Value: p.Value,
	}
}

func sessionToWire(s *fsmpb.Session) *batonpb.Session {
	return &batonpb.Session{
		Id: s.GetId(), Owner: s.GetOwner(), Ttl: durationpb.New(time.Duration(s.GetTtlNanos())),
		Blacklisted: s.GetBlacklisted(), Created: tsOf(s.GetCreatedUnixNano()), Holds: s.GetHolds(),
	}
}

func pageSize(n uint32) (int, error) {
	switch {
	case n == 0:
		return rules.DefaultPageSize, nil
	case n > rules.MaxPageSize:
		return 0, invalidf("page_size is %d; the limit is %d", n, rules.MaxPageSize)
	}
	return int(n), nil
}
