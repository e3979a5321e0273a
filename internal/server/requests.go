package server

import (
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// Limits of the API that the state machine does not know.
const (
	// DefaultPageSize and MaxPageSize bound List and ListSessions pages.
	DefaultPageSize = 100
	MaxPageSize     = 1000
	// MaxWaitTimeout bounds wait_timeout: a longer wait is better expressed
	// as "until cancelled".
	MaxWaitTimeout = 24 * time.Hour
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
	case e == fsmpb.Error_ERROR_PERMISSION_DENIED:
		return batonpb.Reason_NOT_PERMITTED
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

func checkName(field, name string) error {
	if err := fsm.ValidateLockName(name); err != nil {
		return invalidf("%s: %s", field, trimPrefix(err))
	}
	return nil
}

func checkOwner(field, owner string) error {
	if err := fsm.ValidateOwner(owner); err != nil {
		return invalidf("%s: %s", field, trimPrefix(err))
	}
	return nil
}

// trimPrefix drops the "fsm: invalid argument: " style prefixes so that a
// message names the field once.
func trimPrefix(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 && strings.HasPrefix(msg, "fsm") {
		return msg[i+2:]
	}
	return msg
}

// openCommand validates an open and returns its command and the session's
// secret: the client's, or one drawn here.
func openCommand(r *batonpb.OpenSessionRequest) (*fsmpb.Command, string, error) {
	ttl := fsm.DefaultTTL
	if r.GetTtl() != nil {
		if err := r.GetTtl().CheckValid(); err != nil {
			return nil, "", invalidf("ttl: %v", err)
		}
		ttl = r.GetTtl().AsDuration()
	}
	if err := fsm.ValidateTTL(ttl); err != nil {
		return nil, "", invalidf("ttl: %s", trimPrefix(err))
	}
	if err := checkOwner("owner", r.GetOwner()); err != nil {
		return nil, "", err
	}
	secret := r.GetSecret()
	if secret == "" {
		secret = NewSecret()
	} else if err := checkSecret("secret", secret); err != nil {
		return nil, "", err
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
	if err := checkOwner("owner_key", r.GetOwnerKey()); err != nil {
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
		if timeout <= 0 || timeout > MaxWaitTimeout {
			return nil, invalidf("wait_timeout is %s; it must be in (0, %s]", timeout, MaxWaitTimeout)
		}
	}
	if err := checkLimit(r.GetLimit()); err != nil {
		return nil, err
	}
	holdLimit, err := checkHoldLimit(r.GetHoldLimit())
	if err != nil {
		return nil, err
	}
	cmd, op := fsm.NewAcquire()
	op.Lock, op.OwnerKey, op.Wait, op.WaitTimeoutNanos = r.GetName(), r.GetOwnerKey(), r.GetWait(), int64(timeout)
	op.Shared, op.Limit, op.HoldLimitNanos = r.GetShared(), r.GetLimit(), int64(holdLimit)
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
	if holdLimit < fsm.MinHoldLimit || holdLimit > fsm.MaxHoldLimit || holdLimit%time.Millisecond != 0 {
		return 0, invalidf("hold_limit is %s; it must be in [%s, %s], in whole milliseconds", holdLimit, fsm.MinHoldLimit, fsm.MaxHoldLimit)
	}
	return holdLimit, nil
}

func checkLimit(limit uint32) error {
	if limit > fsm.MaxHoldersPerLock {
		return invalidf("limit is %d; it must be in 0..%d (0 means 1)", limit, fsm.MaxHoldersPerLock)
	}
	return nil
}

func acquireManyCommand(r *batonpb.AcquireManyRequest) (*fsmpb.Command, error) {
	if err := checkHeader(r.GetHeader()); err != nil {
		return nil, err
	}
	if n := len(r.GetNames()); n == 0 || n > fsm.MaxAcquireMany {
		return nil, invalidf("names has %d entries; it must have 1..%d", n, fsm.MaxAcquireMany)
	}
	seen := make(map[string]struct{}, len(r.GetNames()))
	for i, name := range r.GetNames() {
		if err := checkName("names["+strconv.Itoa(i)+"]", name); err != nil {
			return nil, err
		}
		if _, dup := seen[name]; dup {
			return nil, invalidf("names[%d]: %q appears twice", i, name)
		}
		seen[name] = struct{}{}
	}
	if err := checkOwner("owner_key", r.GetOwnerKey()); err != nil {
		return nil, err
	}
	if err := checkLimit(r.GetLimit()); err != nil {
		return nil, err
	}
	holdLimit, err := checkHoldLimit(r.GetHoldLimit())
	if err != nil {
		return nil, err
	}
	return stamp(r.GetHeader(), &fsmpb.Command{Op: &fsmpb.Command_AcquireMany{AcquireMany: &fsmpb.AcquireMany{
		Locks: r.GetNames(), OwnerKey: r.GetOwnerKey(), Shared: r.GetShared(), Limit: r.GetLimit(), All: r.GetAll(),
		HoldLimitNanos: int64(holdLimit),
	}}}), nil
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
	if err := checkOwner("owner_key", r.GetOwnerKey()); err != nil {
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

func holderToWire(h *fsmpb.Holder) *batonpb.Holder {
	if h == nil {
		return nil
	}
	return &batonpb.Holder{
		SessionId: h.GetSessionId(), Owner: h.GetOwner(), OwnerKey: h.GetOwnerKey(),
		Token: h.GetToken(), Count: h.GetCount(), Since: tsOf(h.GetSinceUnixNano()), Shared: h.GetShared(),
		HoldLimit: durationOrNil(h.GetHoldLimitNanos()),
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

func acquireToWire(seq uint64, o *fsmpb.AcquireOutcome) *batonpb.AcquireResponse {
	r := &batonpb.AcquireResponse{}
	fillAcquireResponse(r, seq, o)
	return r
}

// fillAcquireResponse sets r, a zero AcquireResponse, to the API's form of o.
func fillAcquireResponse(r *batonpb.AcquireResponse, seq uint64, o *fsmpb.AcquireOutcome) {
	r.Name, r.Seq, r.Holder = o.GetLock(), seq, holderToWire(o.GetHolder())
	switch o.GetStatus() {
	case fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED:
		r.Acquired, r.Token, r.Count, r.Holder = true, o.GetToken(), o.GetCount(), nil
	case fsmpb.AcquireStatus_ACQUIRE_STATUS_QUEUED:
		r.Queued, r.Position = true, o.GetPosition()
	case fsmpb.AcquireStatus_ACQUIRE_STATUS_SKIPPED:
		r.Skipped = true
	}
}

func lockToWire(l *fsmpb.Lock) *batonpb.Lock {
	out := &batonpb.Lock{Name: l.GetName(), Limit: limitOf(l)}
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
}

func pastToWire(p fsm.PastHold) *batonpb.PastHold {
	return &batonpb.PastHold{
		SessionId: p.SessionID, Owner: p.Owner, OwnerKey: p.OwnerKey, Token: p.Token, Shared: p.Shared,
		Since: tsOf(p.Since), Ended: tsOf(p.Ended), EndedIndex: p.EndedIndex, How: holdEnds[p.How],
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
		return DefaultPageSize, nil
	case n > MaxPageSize:
		return 0, invalidf("page_size is %d; the limit is %d", n, MaxPageSize)
	}
	return int(n), nil
}
