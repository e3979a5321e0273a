package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/batonlock/baton/api/batonpb"
)

// The Sessions stream without gRPC. A client that opens a connection to a
// member's client port with SessionsPreface talks the Sessions call over
// it directly: the member answers with the same preface, then each side
// writes frames, a 4-byte big-endian length and a SessionsRequest (client
// to member) or a SessionsResponse (member to client), encoded as the
// gRPC call encodes them. The member ends the stream with a response that
// holds one ChannelResponse of channel 0 (never a session's) whose End
// says why, as the call's status would; a clean end is the connection
// closing. The batches, channels and answers are those of the call: only
// HTTP/2 is gone, and with it a goroutine hand-off on each side of each
// direction (gRPC's reader and writer goroutines).

// SessionsPreface opens a Sessions connection, and is the member's
// answer. Neither gRPC nor HTTP/1 starts with it, so the client port tells
// it apart by its first bytes. It is longer than HTTP/2's client preface
// (24 bytes) and ends a line, so that a server of another kind (a release
// before these connections, a plain gRPC server, a proxy) has read enough
// to refuse it, and does, instead of waiting for more.
const SessionsPreface = "BATON-SESSIONS/1 baton.v1.Baton/Sessions\n"

// EndChannel is the channel of the response that ends a Sessions
// connection.
const EndChannel = 0

// AppendRequestFrame appends m as one frame to b.
func AppendRequestFrame(b []byte, m *batonpb.SessionsRequest) ([]byte, error) {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	b, err := MarshalSessionsRequest(b, m)
	if err != nil {
		return b[:start], err
	}
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	return b, nil
}

// AppendResponseFrame appends m as one frame to b.
func AppendResponseFrame(b []byte, m *batonpb.SessionsResponse) ([]byte, error) {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	b, err := MarshalSessionsResponse(b, m)
	if err != nil {
		return b[:start], err
	}
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	return b, nil
}

// ErrFrameTooLarge is returned by ReadFrame for a frame over its limit.
var ErrFrameTooLarge = errors.New("sessions frame over the size limit")

// ReadFrame reads one frame's message from r into buf, grown as needed,
// and returns it; it is valid until the next ReadFrame with that buf. A
// frame of more than max bytes is refused without being read.
func ReadFrame(r *bufio.Reader, max int, buf *[]byte) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	if n > max {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrFrameTooLarge, n, max)
	}
	if cap(*buf) < n {
		*buf = make([]byte, n)
	}
	b := (*buf)[:n]
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return b, nil
}
