package baton

// What one send of a request carries: its id for this stream and a copy
// of its header, built without copying the request.

import (
	"github.com/batonlock/baton/api/batonpb"
)

// stamp returns what one send of req carries: req with id and, for a
// mutating request (h not nil), a copy of the header. req stays as it is,
// for a resend on another stream; the copy is new down to the message that
// carries the header and shares the rest (strings, durations), which
// nobody changes once sent, so that an acquire's or a release's copy is
// one allocation (proto.Clone's deep copy costs a busy client dearly).
// TestStampCopiesEveryField fails if a field added to these requests is
// not copied here.
func stamp(req *batonpb.SessionRequest, id uint64, h *batonpb.RequestHeader) *batonpb.SessionRequest {
	if h == nil {
		return &batonpb.SessionRequest{Id: id, Kind: req.GetKind()}
	}
	switch k := req.GetKind().(type) {
	case *batonpb.SessionRequest_Acquire:
		a, s := k.Acquire, &stampedAcquire{}
		copyHeader(&s.h, h)
		s.a.Header, s.a.Name, s.a.OwnerKey, s.a.Wait, s.a.WaitTimeout = &s.h, a.GetName(), a.GetOwnerKey(), a.GetWait(), a.GetWaitTimeout()
		s.a.Shared, s.a.Limit, s.a.HoldLimit, s.a.LockDelay = a.GetShared(), a.GetLimit(), a.GetHoldLimit(), a.GetLockDelay()
		s.a.Value = a.GetValue()
		s.k.Acquire = &s.a
		s.r.Id, s.r.Kind = id, &s.k
		return &s.r
	case *batonpb.SessionRequest_Release:
		a, s := k.Release, &stampedRelease{}
		copyHeader(&s.h, h)
		s.a.Header, s.a.Name, s.a.Token, s.a.OwnerKey = &s.h, a.GetName(), a.GetToken(), a.GetOwnerKey()
		s.k.Release = &s.a
		s.r.Id, s.r.Kind = id, &s.k
		return &s.r
	}
	r := &batonpb.SessionRequest{Id: id, Kind: req.GetKind()}
	hc := &batonpb.RequestHeader{}
	copyHeader(hc, h)
	switch k := req.GetKind().(type) {
	case *batonpb.SessionRequest_AcquireMany:
		a := k.AcquireMany
		r.Kind = &batonpb.SessionRequest_AcquireMany{AcquireMany: &batonpb.AcquireManyRequest{
			Header: hc, Names: a.GetNames(), OwnerKey: a.GetOwnerKey(),
			Shared: a.GetShared(), Limit: a.GetLimit(), All: a.GetAll(), HoldLimit: a.GetHoldLimit(),
			LockDelay: a.GetLockDelay(), Modes: a.GetModes(),
		}}
	case *batonpb.SessionRequest_Cancel:
		a := k.Cancel
		r.Kind = &batonpb.SessionRequest_Cancel{Cancel: &batonpb.CancelRequest{
			Header: hc, Name: a.GetName(), AcquireSeq: a.GetAcquireSeq(),
		}}
	case *batonpb.SessionRequest_Proclaim:
		a := k.Proclaim
		r.Kind = &batonpb.SessionRequest_Proclaim{Proclaim: &batonpb.ProclaimRequest{
			Header: hc, Name: a.GetName(), Token: a.GetToken(), OwnerKey: a.GetOwnerKey(), Value: a.GetValue(),
		}}
	case *batonpb.SessionRequest_Close:
		r.Kind = &batonpb.SessionRequest_Close{Close: &batonpb.CloseSessionRequest{SessionId: h.GetSessionId(), Seq: h.GetSeq(), Secret: k.Close.GetSecret()}}
	}
	return r
}

func copyHeader(dst, src *batonpb.RequestHeader) {
	dst.SessionId, dst.Seq, dst.MinUnackedSeq = src.GetSessionId(), src.GetSeq(), src.GetMinUnackedSeq()
}

// stampedAcquire and stampedRelease are a send of the two commonest
// requests, its messages allocated together.
type (
	stampedAcquire struct {
		r batonpb.SessionRequest
		k batonpb.SessionRequest_Acquire
		a batonpb.AcquireRequest
		h batonpb.RequestHeader
	}
	stampedRelease struct {
		r batonpb.SessionRequest
		k batonpb.SessionRequest_Release
		a batonpb.ReleaseRequest
		h batonpb.RequestHeader
	}
)
