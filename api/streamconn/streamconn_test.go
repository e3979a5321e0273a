package streamconn

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
)

func TestFramesRoundTrip(t *testing.T) {
	var f Frame
	var stream []byte
	payloads := [][]byte{nil, []byte("x"), bytes.Repeat([]byte("ab"), 200), bytes.Repeat([]byte{7}, 100<<10)}
	for i, p := range payloads {
		b := append(f.Payload(), p...)
		stream = append(stream, f.Seal(byte(i+1), b)...)
	}
	stream = Append(stream, KindEnd, []byte("last"))
	r := NewReader(bytes.NewReader(stream), 4<<10)
	for i, want := range payloads {
		kind, got, err := r.Next(1 << 20)
		if err != nil || kind != byte(i+1) || !bytes.Equal(got, want) {
			t.Fatalf("frame %d: kind %d, %d bytes, %v; want kind %d, %d bytes", i, kind, len(got), err, i+1, len(want))
		}
	}
	if kind, got, err := r.Next(16); err != nil || kind != KindEnd || string(got) != "last" {
		t.Fatalf("last frame: %d %q %v", kind, got, err)
	}
	if _, _, err := r.Next(16); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

// A frame over the limit is refused from its header: its payload is not
// read (a reader may not buffer what a hostile peer announces).
func TestFrameOverTheLimit(t *testing.T) {
	stream := Append(nil, KindMessage, bytes.Repeat([]byte{1}, 1000))
	src := &countingReader{r: bytes.NewReader(stream)}
	r := NewReader(src, 16)
	_, _, err := r.Next(999)
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Size != 1000 || tl.Max != 999 || tl.Kind != KindMessage {
		t.Fatalf("Next: %v; want a TooLargeError for 1000 bytes over 999", err)
	}
	if src.n > 16 {
		t.Fatalf("read %d bytes of the stream; want at most the buffer's 16", src.n)
	}
	// An announced length beyond any int is refused too.
	huge := append([]byte{KindMessage}, protowire.AppendVarint(nil, 1<<63)...)
	if _, _, err := NewReader(bytes.NewReader(huge), 16).Next(1 << 20); !errors.As(err, &tl) {
		t.Fatalf("a 2^63-byte frame: %v; want a TooLargeError", err)
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestTruncatedFrames(t *testing.T) {
	whole := Append(nil, KindMessage, []byte("hello"))
	for cut := 1; cut < len(whole); cut++ {
		_, _, err := NewReader(bytes.NewReader(whole[:cut]), 64).Next(64)
		if err != io.ErrUnexpectedEOF {
			t.Errorf("cut after %d of %d bytes: %v; want io.ErrUnexpectedEOF", cut, len(whole), err)
		}
	}
	// A varint that never ends is malformed, not a long wait.
	bad := append([]byte{KindMessage}, bytes.Repeat([]byte{0xff}, 11)...)
	if _, _, err := NewReader(bytes.NewReader(bad), 64).Next(64); err == nil {
		t.Error("an 11-byte length varint was accepted")
	}
}

func TestHello(t *testing.T) {
	h := Hello{Authorization: "Bearer s3cret", Client: "baton-go"}
	b := AppendHello(nil, h)
	// A later client's field this one does not know is skipped.
	b = protowire.AppendTag(b, 9, protowire.VarintType)
	b = protowire.AppendVarint(b, 42)
	got, err := ParseHello(b)
	if err != nil || got != h {
		t.Fatalf("ParseHello: %+v, %v; want %+v", got, err, h)
	}
	if got, err := ParseHello(nil); err != nil || got != (Hello{}) {
		t.Fatalf("empty hello: %+v, %v", got, err)
	}
	for _, bad := range [][]byte{{0x0a, 5, 'a'}, {0x0a}, {0xff}} {
		if _, err := ParseHello(bad); err == nil {
			t.Errorf("ParseHello(%x) accepted a malformed hello", bad)
		}
	}
}

func TestEndCarriesTheStatus(t *testing.T) {
	if err := ParseEnd(AppendEnd(nil, nil)); err != nil {
		t.Fatalf("OK end: %v", err)
	}
	st, _ := status.New(codes.Unavailable, "not the leader").WithDetails(&errdetails.ErrorInfo{Reason: "NOT_LEADER", Domain: "baton", Metadata: map[string]string{"leader_addr": "10.0.0.2:7700"}})
	err := ParseEnd(AppendEnd(nil, st.Err()))
	got := status.Convert(err)
	if got.Code() != codes.Unavailable || got.Message() != "not the leader" || len(got.Details()) != 1 {
		t.Fatalf("end: %v (details %v); want UNAVAILABLE with its ErrorInfo", err, got.Details())
	}
	if info := got.Details()[0].(*errdetails.ErrorInfo); info.GetMetadata()["leader_addr"] != "10.0.0.2:7700" {
		t.Fatalf("details: %v", info)
	}
	// An error that is not a status ends as UNKNOWN with its text.
	if err := ParseEnd(AppendEnd(nil, errors.New("boom"))); status.Code(err) != codes.Unknown || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("plain error: %v", err)
	}
	if err := ParseEnd([]byte{0xff}); err == nil || status.Code(err) != codes.Unknown {
		t.Fatalf("a malformed end: %v; want an error", err)
	}
}

// The preface is none of what the member's other protocols start with.
func TestPrefaceIsUnlikeTheOthers(t *testing.T) {
	for _, other := range []string{"PRI * HTTP/2.0", "GET ", "POST ", "PUT ", "DELETE ", "HEAD ", "OPTIONS ", "PATCH ", "CONNECT ", "TRACE ", "\x16\x03"} {
		n := min(len(other), len(Preface))
		if Preface[:n] == other[:n] {
			t.Errorf("the preface starts as %q does", other)
		}
	}
}

// FuzzReader: whatever a peer sends, the reader returns frames within the
// limit or an error, and never panics; hello and end payloads parse or
// fail cleanly.
func FuzzReader(f *testing.F) {
	f.Add(Append(Append(nil, KindHello, AppendHello(nil, Hello{Authorization: "Bearer x"})), KindMessage, []byte{1, 2}))
	f.Add(Append(nil, KindEnd, AppendEnd(nil, status.Error(codes.NotFound, "x"))))
	f.Add([]byte{KindMessage, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		const limit = 1 << 12
		r := NewReader(bytes.NewReader(b), 64)
		read := 0
		for {
			kind, p, err := r.Next(limit)
			if err != nil {
				return
			}
			if len(p) > limit {
				t.Fatalf("a frame of %d bytes over the limit %d", len(p), limit)
			}
			read += 1 + len(p)
			if read > len(b) {
				t.Fatalf("frames of %d bytes from %d", read, len(b))
			}
			switch kind {
			case KindHello:
				_, _ = ParseHello(p)
			case KindEnd:
				_ = ParseEnd(p)
			}
		}
	})
}
