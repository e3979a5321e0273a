package wire

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/api/protofield"
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
		b = protofield.AppendMessageHeader(b, 1, channelRequestSize(r))
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
		b = protofield.AppendMessageHeader(b, 1, channelResponseSize(r))
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
		n += protofield.SizeMessage(1, channelRequestSize(r))
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
		n += protofield.SizeMessage(1, channelResponseSize(r))
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
// acquire without durations (a wait timeout, a hold limit, a lock-delay)
// or a value, a release or a keepalive, without secrets, nothing unknown.
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
		return a != nil && !unknown(a) && a.GetWaitTimeout() == nil && a.GetHoldLimit() == nil && a.GetLockDelay() == nil && a.GetValue() == "" && headerOK(a.GetHeader()) &&
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
// an acquire's answer without a holder or a lock-delay's durations and
// times, a release's or a grant, with or without an error, nothing
// unknown.
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
	// And a signed token that is not (the server's never are: base64url).
	if !utf8.ValidString(sr.GetAcquire().GetSignedToken()) || !utf8.ValidString(sr.GetGrant().GetSignedToken()) {
		return false
	}
	switch k := sr.GetKind().(type) {
	case nil:
		return true
	case *batonpb.SessionResponse_Acquire:
		a := k.Acquire
		return a != nil && !unknown(a) && a.GetHolder() == nil && a.GetLockDelay() == nil && a.GetDelayedUntil() == nil && utf8.ValidString(a.GetName())
	case *batonpb.SessionResponse_Release:
		return k.Release != nil && !unknown(k.Release)
	case *batonpb.SessionResponse_Grant:
		return k.Grant != nil && !unknown(k.Grant) && utf8.ValidString(k.Grant.GetName())
	}
	return false
}

// The fields are written with protofield's proto3 helpers: a zero scalar
// is left out, a message is written when set.

func headerSize(h *batonpb.RequestHeader) int {
	return protofield.SizeUint(1, h.GetSessionId()) + protofield.SizeUint(2, h.GetSeq()) +
		protofield.SizeUint(3, h.GetMinUnackedSeq())
}

func appendHeader(b []byte, num protowire.Number, h *batonpb.RequestHeader) []byte {
	if h == nil {
		return b
	}
	b = protofield.AppendMessageHeader(b, num, headerSize(h))
	b = protofield.AppendUint(b, 1, h.GetSessionId())
	b = protofield.AppendUint(b, 2, h.GetSeq())
	return protofield.AppendUint(b, 3, h.GetMinUnackedSeq())
}

func sizeHeaderField(num protowire.Number, h *batonpb.RequestHeader) int {
	if h == nil {
		return 0
	}
	return protofield.SizeMessage(num, headerSize(h))
}

func acquireRequestSize(a *batonpb.AcquireRequest) int {
	return sizeHeaderField(1, a.GetHeader()) + protofield.SizeString(2, a.GetName()) + protofield.SizeString(3, a.GetOwnerKey()) +
		protofield.SizeBool(4, a.GetWait()) + protofield.SizeBool(6, a.GetShared()) + protofield.SizeUint(7, uint64(a.GetLimit()))
}

func releaseRequestSize(r *batonpb.ReleaseRequest) int {
	return sizeHeaderField(1, r.GetHeader()) + protofield.SizeString(2, r.GetName()) +
		protofield.SizeUint(3, r.GetToken()) + protofield.SizeString(4, r.GetOwnerKey())
}

// sessionRequestBody is the number and size of sr's kind.
func sessionRequestBody(sr *batonpb.SessionRequest) (protowire.Number, int) {
	switch k := sr.GetKind().(type) {
	case *batonpb.SessionRequest_Acquire:
		return 5, acquireRequestSize(k.Acquire)
	case *batonpb.SessionRequest_Release:
		return 6, releaseRequestSize(k.Release)
	case *batonpb.SessionRequest_KeepAlive:
		return 4, protofield.SizeUint(1, k.KeepAlive.GetSessionId())
	}
	panic("wire: not a fast shape")
}

func sessionRequestSize(sr *batonpb.SessionRequest) int {
	num, size := sessionRequestBody(sr)
	return protofield.SizeUint(1, sr.GetId()) + protofield.SizeMessage(num, size)
}

func channelRequestSize(r *batonpb.ChannelRequest) int {
	return protofield.SizeUint(1, r.GetChannel()) + protofield.SizeMessage(2, sessionRequestSize(r.GetRequest())) +
		protofield.SizeBool(3, r.GetDetach())
}

func appendChannelRequest(b []byte, r *batonpb.ChannelRequest) []byte {
	sr := r.GetRequest()
	b = protofield.AppendUint(b, 1, r.GetChannel())
	b = protofield.AppendMessageHeader(b, 2, sessionRequestSize(sr))
	b = protofield.AppendUint(b, 1, sr.GetId())
	num, size := sessionRequestBody(sr)
	b = protofield.AppendMessageHeader(b, num, size)
	switch k := sr.GetKind().(type) {
	case *batonpb.SessionRequest_Acquire:
		a := k.Acquire
		b = appendHeader(b, 1, a.GetHeader())
		b = protofield.AppendString(b, 2, a.GetName())
		b = protofield.AppendString(b, 3, a.GetOwnerKey())
		b = protofield.AppendBool(b, 4, a.GetWait())
		b = protofield.AppendBool(b, 6, a.GetShared())
		b = protofield.AppendUint(b, 7, uint64(a.GetLimit()))
	case *batonpb.SessionRequest_Release:
		a := k.Release
		b = appendHeader(b, 1, a.GetHeader())
		b = protofield.AppendString(b, 2, a.GetName())
		b = protofield.AppendUint(b, 3, a.GetToken())
		b = protofield.AppendString(b, 4, a.GetOwnerKey())
	case *batonpb.SessionRequest_KeepAlive:
		b = protofield.AppendUint(b, 1, k.KeepAlive.GetSessionId())
	}
	return protofield.AppendBool(b, 3, r.GetDetach())
}

func errorSize(e *batonpb.Error) int {
	return protofield.SizeUint(1, uint64(e.GetCode())) + protofield.SizeUint(2, uint64(int64(e.GetReason()))) +
		protofield.SizeString(3, e.GetMessage()) + protofield.SizeString(4, e.GetLeaderAddr())
}

func acquireResponseSize(a *batonpb.AcquireResponse) int {
	return protofield.SizeString(1, a.GetName()) + protofield.SizeBool(2, a.GetAcquired()) +
		protofield.SizeUint(3, a.GetToken()) + protofield.SizeUint(4, uint64(a.GetCount())) +
		protofield.SizeBool(6, a.GetQueued()) + protofield.SizeUint(7, uint64(a.GetPosition())) +
		protofield.SizeUint(8, a.GetSeq()) + protofield.SizeBool(9, a.GetSkipped()) +
		protofield.SizeString(12, a.GetSignedToken())
}

func grantSize(g *batonpb.Grant) int {
	return protofield.SizeUint(1, g.GetSeq()) + protofield.SizeString(2, g.GetName()) + protofield.SizeUint(3, g.GetToken()) +
		protofield.SizeString(4, g.GetSignedToken())
}

// sessionResponseBody is the number and size of sr's kind (0: none).
func sessionResponseBody(sr *batonpb.SessionResponse) (protowire.Number, int) {
	switch k := sr.GetKind().(type) {
	case *batonpb.SessionResponse_Acquire:
		return 5, acquireResponseSize(k.Acquire)
	case *batonpb.SessionResponse_Release:
		return 6, protofield.SizeUint(1, uint64(k.Release.GetRemainingCount()))
	case *batonpb.SessionResponse_Grant:
		return 10, grantSize(k.Grant)
	}
	return 0, 0
}

func sessionResponseSize(sr *batonpb.SessionResponse) int {
	n := protofield.SizeUint(1, sr.GetId())
	if e := sr.GetError(); e != nil {
		n += protofield.SizeMessage(2, errorSize(e))
	}
	if num, size := sessionResponseBody(sr); num != 0 {
		n += protofield.SizeMessage(num, size)
	}
	return n
}

func channelResponseSize(r *batonpb.ChannelResponse) int {
	return protofield.SizeUint(1, r.GetChannel()) + protofield.SizeMessage(2, sessionResponseSize(r.GetResponse()))
}

func appendChannelResponse(b []byte, r *batonpb.ChannelResponse) []byte {
	sr := r.GetResponse()
	b = protofield.AppendUint(b, 1, r.GetChannel())
	b = protofield.AppendMessageHeader(b, 2, sessionResponseSize(sr))
	b = protofield.AppendUint(b, 1, sr.GetId())
	if e := sr.GetError(); e != nil {
		b = protofield.AppendMessageHeader(b, 2, errorSize(e))
		b = protofield.AppendUint(b, 1, uint64(e.GetCode()))
		b = protofield.AppendUint(b, 2, uint64(int64(e.GetReason())))
		b = protofield.AppendString(b, 3, e.GetMessage())
		b = protofield.AppendString(b, 4, e.GetLeaderAddr())
	}
	num, size := sessionResponseBody(sr)
	if num == 0 {
		return b
	}
	b = protofield.AppendMessageHeader(b, num, size)
	switch k := sr.GetKind().(type) {
	case *batonpb.SessionResponse_Acquire:
		a := k.Acquire
		b = protofield.AppendString(b, 1, a.GetName())
		b = protofield.AppendBool(b, 2, a.GetAcquired())
		b = protofield.AppendUint(b, 3, a.GetToken())
		b = protofield.AppendUint(b, 4, uint64(a.GetCount()))
		b = protofield.AppendBool(b, 6, a.GetQueued())
		b = protofield.AppendUint(b, 7, uint64(a.GetPosition()))
		b = protofield.AppendUint(b, 8, a.GetSeq())
		b = protofield.AppendBool(b, 9, a.GetSkipped())
		b = protofield.AppendString(b, 12, a.GetSignedToken())
	case *batonpb.SessionResponse_Release:
		b = protofield.AppendUint(b, 1, uint64(k.Release.GetRemainingCount()))
	case *batonpb.SessionResponse_Grant:
		g := k.Grant
		b = protofield.AppendUint(b, 1, g.GetSeq())
		b = protofield.AppendString(b, 2, g.GetName())
		b = protofield.AppendUint(b, 3, g.GetToken())
		b = protofield.AppendString(b, 4, g.GetSignedToken())
	}
	return b
}
