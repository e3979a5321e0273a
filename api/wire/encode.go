package wire

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/api/batonpb"
)

// The encoders write the hot shapes (those the decoders know) byte for
// byte as proto.Marshal does (TestEncodeAsProto and FuzzEncode compare
// the bytes), without its reflective size pass and walk; a batch with
// anything else in it is left to proto whole.

// MarshalSessionsRequest appends m's encoding to b, as proto.Marshal
// would encode it.
func MarshalSessionsRequest(b []byte, m *batonpb.SessionsRequest) ([]byte, error) {
	if _, ok := sizeSessionsRequest(m); ok {
		return appendSessionsRequest(b, m), nil
	}
	return proto.MarshalOptions{}.MarshalAppend(b, m)
}

func appendSessionsRequest(b []byte, m *batonpb.SessionsRequest) []byte {
	for _, r := range m.GetRequests() {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(channelRequestSize(r)))
		b = appendChannelRequest(b, r)
	}
	return b
}

// MarshalSessionsResponse appends m's encoding to b, as proto.Marshal
// would encode it.
func MarshalSessionsResponse(b []byte, m *batonpb.SessionsResponse) ([]byte, error) {
	if _, ok := sizeSessionsResponse(m); ok {
		return appendSessionsResponse(b, m), nil
	}
	return proto.MarshalOptions{}.MarshalAppend(b, m)
}

func appendSessionsResponse(b []byte, m *batonpb.SessionsResponse) []byte {
	for _, r := range m.GetResponses() {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(channelResponseSize(r)))
		b = appendChannelResponse(b, r)
	}
	return b
}

// ChannelRequestSize is proto.Size(r).
func ChannelRequestSize(r *batonpb.ChannelRequest) int {
	if fastChannelRequest(r) {
		return channelRequestSize(r)
	}
	return proto.Size(r)
}

func sizeSessionsRequest(m *batonpb.SessionsRequest) (int, bool) {
	if unknown(m) {
		return 0, false
	}
	n := 0
	for _, r := range m.GetRequests() {
		if !fastChannelRequest(r) {
			return 0, false
		}
		n += protowire.SizeTag(1) + protowire.SizeBytes(channelRequestSize(r))
	}
	return n, true
}

func sizeSessionsResponse(m *batonpb.SessionsResponse) (int, bool) {
	if unknown(m) {
		return 0, false
	}
	n := 0
	for _, r := range m.GetResponses() {
		if !fastChannelResponse(r) {
			return 0, false
		}
		n += protowire.SizeTag(1) + protowire.SizeBytes(channelResponseSize(r))
	}
	return n, true
}

func unknown(m proto.Message) bool { return len(m.ProtoReflect().GetUnknown()) > 0 }

// CheckSessionRequest returns the size of r encoded, or why proto.Marshal
// (and so Codec) cannot encode it: a string that is not valid UTF-8, say.
// gRPC ends a stream whose message it cannot encode, and on the Sessions
// stream that ends every session's channel, so the client checks each
// request alone before it joins a batch. The hot shapes are checked
// without reflection, the others by encoding them.
func CheckSessionRequest(r *batonpb.SessionRequest) (int, error) {
	if fastSessionRequest(r) {
		return sessionRequestSize(r), nil
	}
	b, err := proto.Marshal(r)
	return len(b), err
}

// fastChannelRequest reports whether r is a shape the encoder writes: an
// acquire without durations, a release or a keepalive, without secrets,
// nothing unknown.
func fastChannelRequest(r *batonpb.ChannelRequest) bool {
	return r != nil && !unknown(r) && fastSessionRequest(r.GetRequest())
}

// fastSessionRequest is fastChannelRequest for the request it carries.
func fastSessionRequest(sr *batonpb.SessionRequest) bool {
	if sr == nil || unknown(sr) {
		return false
	}
	switch k := sr.GetKind().(type) {
	case *batonpb.SessionRequest_Acquire:
		a := k.Acquire
		return a != nil && !unknown(a) && a.GetWaitTimeout() == nil && a.GetHoldLimit() == nil && headerOK(a.GetHeader()) &&
			utf8.ValidString(a.GetName()) && utf8.ValidString(a.GetOwnerKey())
	case *batonpb.SessionRequest_Release:
		a := k.Release
		return a != nil && !unknown(a) && headerOK(a.GetHeader()) &&
			utf8.ValidString(a.GetName()) && utf8.ValidString(a.GetOwnerKey())
	case *batonpb.SessionRequest_KeepAlive:
		return k.KeepAlive != nil && !unknown(k.KeepAlive) && k.KeepAlive.GetSecret() == ""
	}
	return false
}

// headerOK reports whether the encoder writes h: it writes the ids only,
// so a header that carries a secret (which a stream ignores: see
// RequestHeader) is left to proto.
func headerOK(h *batonpb.RequestHeader) bool { return h == nil || !unknown(h) && h.GetSecret() == "" }

// fastChannelResponse reports whether r is a shape the encoder writes:
// an acquire's answer without a holder, a release's or a grant, with or
// without an error, nothing unknown.
func fastChannelResponse(r *batonpb.ChannelResponse) bool {
	if r == nil || unknown(r) || r.GetEnd() != nil {
		return false
	}
	sr := r.GetResponse()
	if sr == nil || unknown(sr) {
		return false
	}
	// proto refuses to encode a string that is not UTF-8.
	if e := sr.GetError(); e != nil && (unknown(e) || !utf8.ValidString(e.GetMessage()) || !utf8.ValidString(e.GetLeaderAddr())) {
		return false
	}
	switch k := sr.GetKind().(type) {
	case nil:
		return true
	case *batonpb.SessionResponse_Acquire:
		return k.Acquire != nil && !unknown(k.Acquire) && k.Acquire.GetHolder() == nil && utf8.ValidString(k.Acquire.GetName())
	case *batonpb.SessionResponse_Release:
		return k.Release != nil && !unknown(k.Release)
	case *batonpb.SessionResponse_Grant:
		return k.Grant != nil && !unknown(k.Grant) && utf8.ValidString(k.Grant.GetName())
	}
	return false
}

// Sizes and appenders of each field, proto3: a zero scalar is left out,
// a message is written when set.

func sizeUint(num protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeVarint(v)
}

func sizeBool(num protowire.Number, v bool) int {
	if !v {
		return 0
	}
	return protowire.SizeTag(num) + 1
}

func sizeString(num protowire.Number, v string) int {
	if v == "" {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(v))
}

func sizeMessage(num protowire.Number, size int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(size)
}

func appendUint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

func appendBool(b []byte, num protowire.Number, v bool) []byte {
	if !v {
		return b
	}
	return append(protowire.AppendTag(b, num, protowire.VarintType), 1)
}

func appendString(b []byte, num protowire.Number, v string) []byte {
	if v == "" {
		return b
	}
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), v)
}

func appendMessageHeader(b []byte, num protowire.Number, size int) []byte {
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.BytesType), uint64(size))
}

func headerSize(h *batonpb.RequestHeader) int {
	return sizeUint(1, h.GetSessionId()) + sizeUint(2, h.GetSeq()) + sizeUint(3, h.GetMinUnackedSeq())
}

func appendHeader(b []byte, num protowire.Number, h *batonpb.RequestHeader) []byte {
	if h == nil {
		return b
	}
	b = appendMessageHeader(b, num, headerSize(h))
	b = appendUint(b, 1, h.GetSessionId())
	b = appendUint(b, 2, h.GetSeq())
	return appendUint(b, 3, h.GetMinUnackedSeq())
}

func sizeHeaderField(num protowire.Number, h *batonpb.RequestHeader) int {
	if h == nil {
		return 0
	}
	return sizeMessage(num, headerSize(h))
}

func acquireRequestSize(a *batonpb.AcquireRequest) int {
	return sizeHeaderField(1, a.GetHeader()) + sizeString(2, a.GetName()) + sizeString(3, a.GetOwnerKey()) +
		sizeBool(4, a.GetWait()) + sizeBool(6, a.GetShared()) + sizeUint(7, uint64(a.GetLimit()))
}

func releaseRequestSize(r *batonpb.ReleaseRequest) int {
	return sizeHeaderField(1, r.GetHeader()) + sizeString(2, r.GetName()) + sizeUint(3, r.GetToken()) + sizeString(4, r.GetOwnerKey())
}

// sessionRequestBody is the number and size of sr's kind.
func sessionRequestBody(sr *batonpb.SessionRequest) (protowire.Number, int) {
	switch k := sr.GetKind().(type) {
	case *batonpb.SessionRequest_Acquire:
		return 5, acquireRequestSize(k.Acquire)
	case *batonpb.SessionRequest_Release:
		return 6, releaseRequestSize(k.Release)
	case *batonpb.SessionRequest_KeepAlive:
		return 4, sizeUint(1, k.KeepAlive.GetSessionId())
	}
	panic("wire: not a fast shape")
}

func sessionRequestSize(sr *batonpb.SessionRequest) int {
	num, size := sessionRequestBody(sr)
	return sizeUint(1, sr.GetId()) + sizeMessage(num, size)
}

func channelRequestSize(r *batonpb.ChannelRequest) int {
	return sizeUint(1, r.GetChannel()) + sizeMessage(2, sessionRequestSize(r.GetRequest())) + sizeBool(3, r.GetDetach())
}

func appendChannelRequest(b []byte, r *batonpb.ChannelRequest) []byte {
	sr := r.GetRequest()
	b = appendUint(b, 1, r.GetChannel())
	b = appendMessageHeader(b, 2, sessionRequestSize(sr))
	b = appendUint(b, 1, sr.GetId())
	num, size := sessionRequestBody(sr)
	b = appendMessageHeader(b, num, size)
	switch k := sr.GetKind().(type) {
	case *batonpb.SessionRequest_Acquire:
		a := k.Acquire
		b = appendHeader(b, 1, a.GetHeader())
		b = appendString(b, 2, a.GetName())
		b = appendString(b, 3, a.GetOwnerKey())
		b = appendBool(b, 4, a.GetWait())
		b = appendBool(b, 6, a.GetShared())
		b = appendUint(b, 7, uint64(a.GetLimit()))
	case *batonpb.SessionRequest_Release:
		a := k.Release
		b = appendHeader(b, 1, a.GetHeader())
		b = appendString(b, 2, a.GetName())
		b = appendUint(b, 3, a.GetToken())
		b = appendString(b, 4, a.GetOwnerKey())
	case *batonpb.SessionRequest_KeepAlive:
		b = appendUint(b, 1, k.KeepAlive.GetSessionId())
	}
	return appendBool(b, 3, r.GetDetach())
}

func errorSize(e *batonpb.Error) int {
	return sizeUint(1, uint64(e.GetCode())) + sizeUint(2, uint64(int64(e.GetReason()))) +
		sizeString(3, e.GetMessage()) + sizeString(4, e.GetLeaderAddr())
}

func acquireResponseSize(a *batonpb.AcquireResponse) int {
	return sizeString(1, a.GetName()) + sizeBool(2, a.GetAcquired()) + sizeUint(3, a.GetToken()) +
		sizeUint(4, uint64(a.GetCount())) + sizeBool(6, a.GetQueued()) + sizeUint(7, uint64(a.GetPosition())) +
		sizeUint(8, a.GetSeq()) + sizeBool(9, a.GetSkipped())
}

func grantSize(g *batonpb.Grant) int {
	return sizeUint(1, g.GetSeq()) + sizeString(2, g.GetName()) + sizeUint(3, g.GetToken())
}

// sessionResponseBody is the number and size of sr's kind (0: none).
func sessionResponseBody(sr *batonpb.SessionResponse) (protowire.Number, int) {
	switch k := sr.GetKind().(type) {
	case *batonpb.SessionResponse_Acquire:
		return 5, acquireResponseSize(k.Acquire)
	case *batonpb.SessionResponse_Release:
		return 6, sizeUint(1, uint64(k.Release.GetRemainingCount()))
	case *batonpb.SessionResponse_Grant:
		return 10, grantSize(k.Grant)
	}
	return 0, 0
}

func sessionResponseSize(sr *batonpb.SessionResponse) int {
	n := sizeUint(1, sr.GetId())
	if e := sr.GetError(); e != nil {
		n += sizeMessage(2, errorSize(e))
	}
	if num, size := sessionResponseBody(sr); num != 0 {
		n += sizeMessage(num, size)
	}
	return n
}

func channelResponseSize(r *batonpb.ChannelResponse) int {
	return sizeUint(1, r.GetChannel()) + sizeMessage(2, sessionResponseSize(r.GetResponse()))
}

func appendChannelResponse(b []byte, r *batonpb.ChannelResponse) []byte {
	sr := r.GetResponse()
	b = appendUint(b, 1, r.GetChannel())
	b = appendMessageHeader(b, 2, sessionResponseSize(sr))
	b = appendUint(b, 1, sr.GetId())
	if e := sr.GetError(); e != nil {
		b = appendMessageHeader(b, 2, errorSize(e))
		b = appendUint(b, 1, uint64(e.GetCode()))
		b = appendUint(b, 2, uint64(int64(e.GetReason())))
		b = appendString(b, 3, e.GetMessage())
		b = appendString(b, 4, e.GetLeaderAddr())
	}
	num, size := sessionResponseBody(sr)
	if num == 0 {
		return b
	}
	b = appendMessageHeader(b, num, size)
	switch k := sr.GetKind().(type) {
	case *batonpb.SessionResponse_Acquire:
		a := k.Acquire
		b = appendString(b, 1, a.GetName())
		b = appendBool(b, 2, a.GetAcquired())
		b = appendUint(b, 3, a.GetToken())
		b = appendUint(b, 4, uint64(a.GetCount()))
		b = appendBool(b, 6, a.GetQueued())
		b = appendUint(b, 7, uint64(a.GetPosition()))
		b = appendUint(b, 8, a.GetSeq())
		b = appendBool(b, 9, a.GetSkipped())
	case *batonpb.SessionResponse_Release:
		b = appendUint(b, 1, uint64(k.Release.GetRemainingCount()))
	case *batonpb.SessionResponse_Grant:
		g := k.Grant
		b = appendUint(b, 1, g.GetSeq())
		b = appendString(b, 2, g.GetName())
		b = appendUint(b, 3, g.GetToken())
	}
	return b
}
