package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/api/batonpb"
)

// Frames carry the messages as proto encodes them, back to back; a frame
// over the limit is refused before its body is read, a cut one is an
// unexpected EOF.
func TestFrames(t *testing.T) {
	req := &batonpb.SessionsRequest{Requests: []*batonpb.ChannelRequest{{Channel: 3, Request: &batonpb.SessionRequest{
		Id: 7, Kind: &batonpb.SessionRequest_Acquire{Acquire: &batonpb.AcquireRequest{Name: "jobs/nightly"}}}}}}
	resp := &batonpb.SessionsResponse{Responses: []*batonpb.ChannelResponse{{Channel: EndChannel, End: &batonpb.ChannelEnd{
		Error: &batonpb.Error{Code: 14, Reason: batonpb.Reason_NOT_LEADER, Message: "stopped leading"}}}}}
	b, err := AppendRequestFrame([]byte("x"), req)
	if err != nil {
		t.Fatal(err)
	}
	if b, err = AppendResponseFrame(b, resp); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(bytes.NewReader(b[1:]))
	var buf []byte
	for _, want := range []proto.Message{req, resp} {
		got, err := ReadFrame(r, 1<<10, &buf)
		if err != nil {
			t.Fatal(err)
		}
		m := want.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(got, m); err != nil || !proto.Equal(m, want) {
			t.Fatalf("frame holds %v (%v), want %v", m, err, want)
		}
	}
	if _, err := ReadFrame(r, 1<<10, &buf); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last frame: %v, want EOF", err)
	}

	one, _ := AppendRequestFrame(nil, req)
	if _, err := ReadFrame(bufio.NewReader(bytes.NewReader(one)), len(one)-5, &buf); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("a frame over the limit: %v, want ErrFrameTooLarge", err)
	}
	if _, err := ReadFrame(bufio.NewReader(bytes.NewReader(one[:len(one)-1])), 1<<10, &buf); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a cut frame: %v, want ErrUnexpectedEOF", err)
	}
}
