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
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/api/batonpb"
)

// UnmarshalSessionsRequest decodes b into m, a new message, as
// proto.Unmarshal does.
func UnmarshalSessionsRequest(b []byte, m *batonpb.SessionsRequest) error {
	n, ok := countRepeated(b)
	if !ok {
		return proto.Unmarshal(b, m)
	}
	m.Requests = make([]*batonpb.ChannelRequest, 0, n)
	for range n {
		var e []byte
		e, b = element(b)
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
	for range n {
		var e []byte
		e, b = element(b)
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

// countRepeated counts the elements of a message that holds only field 1,
// a repeated message (SessionsRequest, SessionsResponse).
func countRepeated(b []byte) (int, bool) {
	n := 0
	for len(b) > 0 {
		num, typ, k := protowire.ConsumeTag(b)
		if k < 0 || num != 1 || typ != protowire.BytesType {
			return 0, false
		}
		b = b[k:]
		if k = protowire.ConsumeFieldValue(num, typ, b); k < 0 {
			return 0, false
		}
		b = b[k:]
		n++
	}
	return n, true
}

// element returns the first element of a message countRepeated accepted,
// and the rest.
func element(b []byte) (e, rest []byte) {
	_, _, k := protowire.ConsumeTag(b)
	e, n := protowire.ConsumeBytes(b[k:])
	return e, b[k+n:]
}

// fields walks the fields of one message. It stops, with bad set, at
// anything the decoders here leave to proto: malformed data, a wire type
// other than varint and bytes, a field number above 63, or a field seen
// twice (proto merges or keeps the last; these messages never repeat one).
type fields struct {
	b    []byte
	seen uint64
	bad  bool
	num  protowire.Number
	typ  protowire.Type
	v    uint64 // a varint field's value
	data []byte // a bytes field's value
}

func (f *fields) next() bool {
	if len(f.b) == 0 {
		return false
	}
	num, typ, n := protowire.ConsumeTag(f.b)
	if n < 0 || num > 63 || f.seen&(1<<num) != 0 {
		f.bad = true
		return false
	}
	f.seen |= 1 << num
	f.b = f.b[n:]
	switch typ {
	case protowire.VarintType:
		f.v, n = protowire.ConsumeVarint(f.b)
	case protowire.BytesType:
		f.data, n = protowire.ConsumeBytes(f.b)
	default:
		n = -1
	}
	if n < 0 {
		f.bad = true
		return false
	}
	f.num, f.typ, f.b = num, typ, f.b[n:]
	return true
}

func (f *fields) varint(num protowire.Number) bool {
	return f.num == num && f.typ == protowire.VarintType
}

func (f *fields) bytes(num protowire.Number) bool {
	return f.num == num && f.typ == protowire.BytesType
}

// str is a string field's value; proto refuses one that is not UTF-8.
func str(b []byte) (string, bool) {
	if !utf8.Valid(b) {
		return "", false
	}
	return string(b), true
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
	f := fields{b: b}
	for f.next() {
		switch {
		case f.varint(1):
			id = f.v
		case f.typ == protowire.BytesType && slices.Contains(kinds, f.num):
			if kind != 0 {
				return 0, 0, nil, false // two kinds of a oneof: proto keeps the last
			}
			kind, body = f.num, f.data
		default:
			return 0, 0, nil, false
		}
	}
	return id, kind, body, !f.bad
}

// decodeChannelRequest decodes a ChannelRequest carrying an acquire, a
// release or a keepalive; it reports false for anything else.
func decodeChannelRequest(b []byte) (*batonpb.ChannelRequest, bool) {
	var (
		channel uint64
		detach  bool
		req     []byte
	)
	f := fields{b: b}
	for f.next() {
		switch {
		case f.varint(1):
			channel = f.v
		case f.bytes(2):
			req = f.data
		case f.varint(3):
			detach = f.v != 0
		default:
			return nil, false
		}
	}
	if f.bad || req == nil {
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
		for f = (fields{b: body}); f.next(); {
			if !f.varint(1) {
				return nil, false
			}
			m.ka.SessionId = f.v
		}
		if f.bad {
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
	f := fields{b: b}
	for f.next() {
		switch {
		case f.varint(1):
			h.SessionId = f.v
		case f.varint(2):
			h.Seq = f.v
		case f.varint(3):
			h.MinUnackedSeq = f.v
		default:
			return false
		}
	}
	return !f.bad
}

// decodeAcquireRequest decodes an acquire without durations (a wait's
// timeout, a hold limit); h is where its header goes.
func decodeAcquireRequest(b []byte, a *batonpb.AcquireRequest, h *batonpb.RequestHeader) bool {
	f := fields{b: b}
	var ok bool
	for f.next() {
		switch {
		case f.bytes(1):
			if !decodeHeader(f.data, h) {
				return false
			}
			a.Header = h
		case f.bytes(2):
			if a.Name, ok = str(f.data); !ok {
				return false
			}
		case f.bytes(3):
			if a.OwnerKey, ok = str(f.data); !ok {
				return false
			}
		case f.varint(4):
			a.Wait = f.v != 0
		case f.varint(6):
			a.Shared = f.v != 0
		case f.varint(7):
			a.Limit = uint32(f.v)
		default:
			return false
		}
	}
	return !f.bad
}

func decodeReleaseRequest(b []byte, r *batonpb.ReleaseRequest, h *batonpb.RequestHeader) bool {
	f := fields{b: b}
	var ok bool
	for f.next() {
		switch {
		case f.bytes(1):
			if !decodeHeader(f.data, h) {
				return false
			}
			r.Header = h
		case f.bytes(2):
			if r.Name, ok = str(f.data); !ok {
				return false
			}
		case f.varint(3):
			r.Token = f.v
		case f.bytes(4):
			if r.OwnerKey, ok = str(f.data); !ok {
				return false
			}
		default:
			return false
		}
	}
	return !f.bad
}

// decodeChannelResponse decodes a ChannelResponse carrying an acquire's
// answer without a holder, a release's or a grant, and no error; it
// reports false for anything else.
func decodeChannelResponse(b []byte) (*batonpb.ChannelResponse, bool) {
	var (
		channel uint64
		resp    []byte
	)
	f := fields{b: b}
	for f.next() {
		switch {
		case f.varint(1):
			channel = f.v
		case f.bytes(2):
			resp = f.data
		default:
			return nil, false
		}
	}
	if f.bad || resp == nil {
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
		for f = (fields{b: body}); f.next(); {
			if !f.varint(1) {
				return nil, false
			}
			m.r.RemainingCount = uint32(f.v)
		}
		if f.bad {
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
	f := fields{b: b}
	var ok bool
	for f.next() {
		switch {
		case f.bytes(1):
			if a.Name, ok = str(f.data); !ok {
				return false
			}
		case f.varint(2):
			a.Acquired = f.v != 0
		case f.varint(3):
			a.Token = f.v
		case f.varint(4):
			a.Count = uint32(f.v)
		case f.varint(6):
			a.Queued = f.v != 0
		case f.varint(7):
			a.Position = uint32(f.v)
		case f.varint(8):
			a.Seq = f.v
		case f.varint(9):
			a.Skipped = f.v != 0
		default:
			return false // the holder, among others
		}
	}
	return !f.bad
}

func decodeGrant(b []byte, g *batonpb.Grant) bool {
	f := fields{b: b}
	var ok bool
	for f.next() {
		switch {
		case f.varint(1):
			g.Seq = f.v
		case f.bytes(2):
			if g.Name, ok = str(f.data); !ok {
				return false
			}
		case f.varint(3):
			g.Token = f.v
		default:
			return false
		}
	}
	return !f.bad
}
