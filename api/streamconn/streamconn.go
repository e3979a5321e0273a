// Package streamconn carries one Sessions stream directly on a client
// connection, without HTTP/2 and gRPC: Baton's own framing of the same
// messages (baton.v1.SessionsRequest and SessionsResponse), on the same
// port as gRPC and HTTP/JSON.
//
// A fleet gives each process its own connection, so a member answers
// most requests on a connection of their own: the cost of a request is
// then the cost of one message on one connection. Over gRPC that is a
// hand-off to the transport's reader and one to its writer on each side,
// HTTP/2 framing and flow control; here the stream's own goroutines read
// and write the socket.
//
// The protocol. The client opens the connection (TCP or TLS) with Preface,
// then sends a hello frame; the member answers with an accept frame, or an
// end frame saying why not. From then on the client sends message frames
// holding a SessionsRequest each, and the member message frames holding a
// SessionsResponse each, until the member sends an end frame (the stream's
// status, as gRPC's trailers carry it) and closes the connection, or the
// client closes it. A frame is a kind byte, the payload's length as a
// uvarint, and the payload.
//
// A member that predates this protocol reads the preface as a malformed
// HTTP/1 request and answers "HTTP/1.1 400": the client sees no accept
// frame (ErrNotSpoken) and uses gRPC with that member.
package streamconn

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Preface opens every connection that speaks this protocol. It cannot
// start an HTTP/2 connection ("PRI * HTTP/2.0") nor a TLS handshake, and
// no HTTP/1 method is spelled so.
const Preface = "BATON-SESSIONS/1\r\n"

// Frame kinds.
const (
	KindHello   byte = 1 // client: the call's metadata (Hello)
	KindAccept  byte = 2 // member: the stream is open
	KindMessage byte = 3 // a SessionsRequest (client) or a SessionsResponse (member)
	KindEnd     byte = 4 // member: the stream's status (google.rpc.Status); the last frame
)

// MaxHelloBytes bounds a hello frame: a bearer token and a version.
const MaxHelloBytes = 16 << 10

// MaxResponseBytes bounds a member's frame, as gRPC's default receive limit
// bounds its messages (4 MiB).
const MaxResponseBytes = 4 << 20

// ErrNotSpoken: the other side answered, but not in this protocol (a
// member that predates it answers the preface as a bad HTTP/1 request).
var ErrNotSpoken = errors.New("streamconn: the member does not speak Baton's session framing")

// TooLargeError is a frame whose announced payload exceeds the reader's
// limit; nothing of its payload was read.
type TooLargeError struct {
	Kind      byte
	Size, Max int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("streamconn: frame of kind %d has %d bytes, over the limit of %d", e.Kind, e.Size, e.Max)
}

// Reader reads frames from a connection.
type Reader struct {
	r   *bufio.Reader
	buf []byte
}

// NewReader reads frames from r through a buffer of size bytes.
func NewReader(r io.Reader, size int) *Reader { return &Reader{r: bufio.NewReaderSize(r, size)} }

// Next reads the next frame. Its payload is valid until the next call. A
// payload over max bytes is refused with *TooLargeError before it is read;
// a connection that ends between frames returns io.EOF, one that ends
// inside a frame io.ErrUnexpectedEOF.
func (r *Reader) Next(max int) (kind byte, payload []byte, err error) {
	kind, err = r.r.ReadByte()
	if err != nil {
		return 0, nil, err
	}
	n, err := binary.ReadUvarint(r.r)
	if err != nil {
		return 0, nil, unexpected(err)
	}
	if n > uint64(max) {
		return 0, nil, &TooLargeError{Kind: kind, Size: int(min(n, 1<<62)), Max: max}
	}
	if cap(r.buf) < int(n) {
		r.buf = make([]byte, n)
	}
	// A buffer grown for one large frame is not kept for every small one.
	if cap(r.buf) > 64<<10 && n <= 64<<10 {
		r.buf = make([]byte, 64<<10)
	}
	payload = r.buf[:n]
	if _, err := io.ReadFull(r.r, payload); err != nil {
		return 0, nil, unexpected(err)
	}
	return kind, payload, nil
}

// Buffered is how many bytes the reader holds that the connection already
// delivered.
func (r *Reader) Buffered() int { return r.r.Buffered() }

// Peek returns the next n bytes without consuming them.
func (r *Reader) Peek(n int) ([]byte, error) { return r.r.Peek(n) }

// Discard skips the next n bytes.
func (r *Reader) Discard(n int) (int, error) { return r.r.Discard(n) }

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// headroom is room before a payload appended to a buffer for its frame's
// header (a kind byte and a uvarint of at most 10 bytes).
const headroom = 1 + binary.MaxVarintLen64

// Frame builds frames in one buffer, so that writing one costs one call.
type Frame struct{ buf []byte }

// Payload starts a frame: append the payload to the returned slice and
// pass it to Seal.
func (f *Frame) Payload() []byte {
	if cap(f.buf) < headroom {
		f.buf = make([]byte, headroom, 4<<10)
	}
	return f.buf[:headroom]
}

// Seal returns the frame of kind whose payload was appended to b (which
// Payload returned): the bytes to write. They are valid until Payload is
// called again.
func (f *Frame) Seal(kind byte, b []byte) []byte {
	n := len(b) - headroom
	var hdr [headroom]byte
	hdr[0] = kind
	h := 1 + binary.PutUvarint(hdr[1:], uint64(n))
	start := headroom - h
	copy(b[start:], hdr[:h])
	f.buf = nil
	if cap(b) <= 64<<10 { // a buffer grown for one large frame is not kept
		f.buf = b[:0]
	}
	return b[start:]
}

// Append appends a whole frame to b.
func Append(b []byte, kind byte, payload []byte) []byte {
	b = append(b, kind)
	b = binary.AppendUvarint(b, uint64(len(payload)))
	return append(b, payload...)
}

// Hello is what a client tells a member before the stream opens: what
// gRPC carries in a call's metadata.
type Hello struct {
	Authorization string // "Bearer TOKEN", or empty
	Client        string // the client's name and version, for the member's logs
}

const (
	helloAuthorization protowire.Number = 1
	helloClient        protowire.Number = 2
)

// AppendHello appends h's encoding to b.
func AppendHello(b []byte, h Hello) []byte {
	if h.Authorization != "" {
		b = protowire.AppendTag(b, helloAuthorization, protowire.BytesType)
		b = protowire.AppendString(b, h.Authorization)
	}
	if h.Client != "" {
		b = protowire.AppendTag(b, helloClient, protowire.BytesType)
		b = protowire.AppendString(b, h.Client)
	}
	return b
}

// ParseHello decodes a hello frame's payload. Fields it does not know are
// skipped, so that a later client may say more.
func ParseHello(b []byte) (Hello, error) {
	var h Hello
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return Hello{}, fmt.Errorf("streamconn: hello: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if typ == protowire.BytesType && (num == helloAuthorization || num == helloClient) {
			v, n := protowire.ConsumeString(b)
			if n < 0 {
				return Hello{}, fmt.Errorf("streamconn: hello field %d: %w", num, protowire.ParseError(n))
			}
			if num == helloAuthorization {
				h.Authorization = v
			} else {
				h.Client = v
			}
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return Hello{}, fmt.Errorf("streamconn: hello field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
	}
	return h, nil
}

// AppendEnd appends the encoding of the status of err (nil: OK) to b, as
// gRPC would send it: code, message and details.
func AppendEnd(b []byte, err error) []byte {
	st := status.Convert(err).Proto()
	out, merr := proto.MarshalOptions{Deterministic: true}.MarshalAppend(b, st)
	if merr != nil {
		// Details that do not encode: the code and message still go.
		st.Details = nil
		out, _ = proto.MarshalOptions{}.MarshalAppend(b, st)
	}
	return out
}

// ParseEnd decodes an end frame's payload: nil for OK, else an error that
// status.FromError reads as the member's status.
func ParseEnd(b []byte) error {
	var st spb.Status
	if err := proto.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("streamconn: end frame: %w", err)
	}
	return status.FromProto(&st).Err()
}
