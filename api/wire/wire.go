// Package wire encodes and decodes the messages of the Sessions stream,
// where every lock and release of a client travels, without protobuf's
// reflection.
//
// The client and the server encode and decode each batch of the stream
// with it (see Codec). It knows the shapes of the hot path (acquire,
// release and keepalive requests; acquire, release and grant answers),
// decodes them into messages allocated together and encodes them byte for
// byte as proto.Marshal; any other shape, or anything unusual (a field it
// does not know, a field twice, a malformed or non-UTF-8 string), goes to
// proto, so the result is always proto's (FuzzUnmarshal and FuzzEncode
// check).
package wire

import (
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/protofield"
)

// UnmarshalSessionsRequest decodes b into m, as proto.Unmarshal does. A
// message decoded before may be passed again: its list of requests is
// reused (the requests themselves are new).
func UnmarshalSessionsRequest(b []byte, m *batonpb.SessionsRequest) error {
	n, ok := countRepeated(b)
	if !ok {
		return proto.Unmarshal(b, m)
	}
	if len(m.ProtoReflect().GetUnknown()) > 0 {
		m.Reset()
	}
	clear(m.Requests)
	m.Requests = slices.Grow(m.Requests[:0], n)
	for f := elements(b); f.Next(); {
		e := f.Bytes()
		r, ok := decodeChannelRequest(e)
		if !ok {
			// Each element of a repeated message decodes alone.
			r = &batonpb.ChannelRequest{}
			if err := proto.Unmarshal(e, r); err != nil {
				m.Requests = nil
				return err
			}
		}
		m.Requests = append(m.Requests, r)
	}
	return nil
}

// UnmarshalSessionsResponse decodes b into m, a new message, as
// proto.Unmarshal does.
func UnmarshalSessionsResponse(b []byte, m *batonpb.SessionsResponse) error {
	n, ok := countRepeated(b)
	if !ok {
		return proto.Unmarshal(b, m)
	}
	m.Responses = make([]*batonpb.ChannelResponse, 0, n)
	for f := elements(b); f.Next(); {
		e := f.Bytes()
		r, ok := decodeChannelResponse(e)
		if !ok {
			r = &batonpb.ChannelResponse{}
			if err := proto.Unmarshal(e, r); err != nil {
				m.Responses = nil
				return err
			}
		}
		m.Responses = append(m.Responses, r)
	}
	return nil
}

// elements reads a message that holds only field 1, a repeated message
// (SessionsRequest, SessionsResponse).
func elements(b []byte) protofield.Reader {
	f := protofield.NewReader(b)
	f.AllowRepeat(1)
	return f
}

// countRepeated counts the elements of a message elements reads, or
// reports false if it holds anything else.
func countRepeated(b []byte) (int, bool) {
	n := 0
	f := elements(b)
	for f.Next() {
		if !f.IsBytes(1) {
			return 0, false
		}
		n++
	}
	return n, f.Done()
}

// The messages of one request or answer, allocated together.
type (
	acquireRequest struct {
		cr batonpb.ChannelRequest
		sr batonpb.SessionRequest
		k  batonpb.SessionRequest_Acquire
		a  batonpb.AcquireRequest
		h  batonpb.RequestHeader
	}
	releaseRequest struct {
		cr batonpb.ChannelRequest
		sr batonpb.SessionRequest
		k  batonpb.SessionRequest_Release
		r  batonpb.ReleaseRequest
		h  batonpb.RequestHeader
	}
	keepAliveRequest struct {
		cr batonpb.ChannelRequest
		sr batonpb.SessionRequest
		k  batonpb.SessionRequest_KeepAlive
		ka batonpb.KeepAliveRequest
	}
	acquireResponse struct {
		cr batonpb.ChannelResponse
		sr batonpb.SessionResponse
		k  batonpb.SessionResponse_Acquire
		a  batonpb.AcquireResponse
	}
	releaseResponse struct {
		cr batonpb.ChannelResponse
		sr batonpb.SessionResponse
		k  batonpb.SessionResponse_Release
		r  batonpb.ReleaseResponse
	}
	grantResponse struct {
		cr batonpb.ChannelResponse
		sr batonpb.SessionResponse
		k  batonpb.SessionResponse_Grant
		g  batonpb.Grant
	}
)

// idAndKind reads a SessionRequest or SessionResponse that holds only its
// id (field 1) and one of kinds, a oneof's message fields.
func idAndKind(b []byte, kinds ...protowire.Number) (id uint64, kind protowire.Number, body []byte, ok bool) {
	f := protofield.NewReader(b)
	for f.Next() {
		switch num := f.Number(); {
		case f.IsVarint(1):
			id = f.Varint()
		case f.IsBytes(num) && slices.Contains(kinds, num):
			if kind != 0 {
				return 0, 0, nil, false // two kinds of a oneof: proto keeps the last
			}
			kind, body = num, f.Bytes()
		default:
			return 0, 0, nil, false
		}
	}
	return id, kind, body, f.Done()
}

// decodeChannelRequest decodes a ChannelRequest carrying an acquire, a
// release or a keepalive; it reports false for anything else.
func decodeChannelRequest(b []byte) (*batonpb.ChannelRequest, bool) {
	var (
		channel uint64
		detach  bool
		req     []byte
	)
	f := protofield.NewReader(b)
	for f.Next() {
		switch {
		case f.IsVarint(1):
			channel = f.Varint()
		case f.IsBytes(2):
			req = f.Bytes()
		case f.IsVarint(3):
			detach = f.Varint() != 0
		default:
			return nil, false
		}
	}
	if !f.Done() || req == nil {
		return nil, false
	}
	id, kind, body, ok := idAndKind(req, 4, 5, 6)
	if !ok {
		return nil, false
	}
	var (
		cr *batonpb.ChannelRequest
		sr *batonpb.SessionRequest
	)
	switch kind {
	case 5:
		m := &acquireRequest{}
		if !decodeAcquireRequest(body, &m.a, &m.h) {
			return nil, false
		}
		m.k.Acquire = &m.a
		cr, sr = &m.cr, &m.sr
		sr.Kind = &m.k
	case 6:
		m := &releaseRequest{}
		if !decodeReleaseRequest(body, &m.r, &m.h) {
			return nil, false
		}
		m.k.Release = &m.r
		cr, sr = &m.cr, &m.sr
		sr.Kind = &m.k
	case 4:
		m := &keepAliveRequest{}
		for f = protofield.NewReader(body); f.Next(); {
			if !f.IsVarint(1) {
				return nil, false
			}
			m.ka.SessionId = f.Varint()
		}
		if !f.Done() {
			return nil, false
		}
		m.k.KeepAlive = &m.ka
		cr, sr = &m.cr, &m.sr
		sr.Kind = &m.k
	default:
		return nil, false
	}
	sr.Id = id
	cr.Channel, cr.Request, cr.Detach = channel, sr, detach
	return cr, true
}

func decodeHeader(b []byte, h *batonpb.RequestHeader) bool {
	f := protofield.NewReader(b)
	for f.Next() {
		switch {
		case f.IsVarint(1):
			h.SessionId = f.Varint()
		case f.IsVarint(2):
			h.Seq = f.Varint()
		case f.IsVarint(3):
			h.MinUnackedSeq = f.Varint()
		default:
			return false
		}
	}
	return f.Done()
}

// decodeAcquireRequest decodes an acquire without durations (a wait's
// timeout, a hold limit) or a value; h is where its header goes.
func decodeAcquireRequest(b []byte, a *batonpb.AcquireRequest, h *batonpb.RequestHeader) bool {
	f := protofield.NewReader(b)
	var ok bool
	for f.Next() {
		switch {
		case f.IsBytes(1):
			if !decodeHeader(f.Bytes(), h) {
				return false
			}
			a.Header = h
		case f.IsBytes(2):
			if a.Name, ok = f.Text(); !ok {
				return false
			}
		case f.IsBytes(3):
			if a.OwnerKey, ok = f.Text(); !ok {
				return false
			}
		case f.IsVarint(4):
			a.Wait = f.Varint() != 0
		case f.IsVarint(6):
			a.Shared = f.Varint() != 0
		case f.IsVarint(7):
			a.Limit = uint32(f.Varint())
		default:
			return false
		}
	}
	return f.Done()
}

func decodeReleaseRequest(b []byte, r *batonpb.ReleaseRequest, h *batonpb.RequestHeader) bool {
	f := protofield.NewReader(b)
	var ok bool
	for f.Next() {
		switch {
		case f.IsBytes(1):
			if !decodeHeader(f.Bytes(), h) {
				return false
			}
			r.Header = h
		case f.IsBytes(2):
			if r.Name, ok = f.Text(); !ok {
				return false
			}
		case f.IsVarint(3):
			r.Token = f.Varint()
		case f.IsBytes(4):
			if r.OwnerKey, ok = f.Text(); !ok {
				return false
			}
		default:
			return false
		}
	}
	return f.Done()
}

// decodeChannelResponse decodes a ChannelResponse carrying an acquire's
// answer without a holder, a release's or a grant, and no error; it
// reports false for anything else.
func decodeChannelResponse(b []byte) (*batonpb.ChannelResponse, bool) {
	var (
		channel uint64
		resp    []byte
	)
	f := protofield.NewReader(b)
	for f.Next() {
		switch {
		case f.IsVarint(1):
			channel = f.Varint()
		case f.IsBytes(2):
			resp = f.Bytes()
		default:
			return nil, false
		}
	}
	if !f.Done() || resp == nil {
		return nil, false
	}
	id, kind, body, ok := idAndKind(resp, 5, 6, 10)
	if !ok {
		return nil, false
	}
	var (
		cr *batonpb.ChannelResponse
		sr *batonpb.SessionResponse
	)
	switch kind {
	case 5:
		m := &acquireResponse{}
		if !decodeAcquireResponse(body, &m.a) {
			return nil, false
		}
		m.k.Acquire = &m.a
		cr, sr = &m.cr, &m.sr
		sr.Kind = &m.k
	case 6:
		m := &releaseResponse{}
		for f = protofield.NewReader(body); f.Next(); {
			if !f.IsVarint(1) {
				return nil, false
			}
			m.r.RemainingCount = uint32(f.Varint())
		}
		if !f.Done() {
			return nil, false
		}
		m.k.Release = &m.r
		cr, sr = &m.cr, &m.sr
		sr.Kind = &m.k
	case 10:
		m := &grantResponse{}
		if !decodeGrant(body, &m.g) {
			return nil, false
		}
		m.k.Grant = &m.g
		cr, sr = &m.cr, &m.sr
		sr.Kind = &m.k
	default:
		return nil, false
	}
	sr.Id = id
	cr.Channel, cr.Response = channel, sr
	return cr, true
}

func decodeAcquireResponse(b []byte, a *batonpb.AcquireResponse) bool {
	f := protofield.NewReader(b)
	var ok bool
	for f.Next() {
		switch {
		case f.IsBytes(1):
			if a.Name, ok = f.Text(); !ok {
				return false
			}
		case f.IsVarint(2):
			a.Acquired = f.Varint() != 0
		case f.IsVarint(3):
			a.Token = f.Varint()
		case f.IsVarint(4):
			a.Count = uint32(f.Varint())
		case f.IsVarint(6):
			a.Queued = f.Varint() != 0
		case f.IsVarint(7):
			a.Position = uint32(f.Varint())
		case f.IsVarint(8):
			a.Seq = f.Varint()
		case f.IsVarint(9):
			a.Skipped = f.Varint() != 0
		case f.IsBytes(12):
			if a.SignedToken, ok = f.Text(); !ok {
				return false
			}
		default:
			return false // the holder, among others
		}
	}
	return f.Done()
}

func decodeGrant(b []byte, g *batonpb.Grant) bool {
	f := protofield.NewReader(b)
	var ok bool
	for f.Next() {
		switch {
		case f.IsVarint(1):
			g.Seq = f.Varint()
		case f.IsBytes(2):
			if g.Name, ok = f.Text(); !ok {
				return false
			}
		case f.IsVarint(3):
			g.Token = f.Varint()
		case f.IsBytes(4):
			if g.SignedToken, ok = f.Text(); !ok {
				return false
			}
		default:
			return false
		}
	}
	return f.Done()
}
