package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/api/batonpb"
)

func header(data []byte) *batonpb.SnapshotHeader {
	sum := sha256.Sum256(data)
	return &batonpb.SnapshotHeader{ClusterId: 0xc1, Index: 1234, Term: 7, LogVersion: 6, Size: uint64(len(data)), DataSha256: sum[:],
		Members: []*batonpb.Member{{Name: "n1", Id: 11, PeerAddr: "127.0.0.1:7811"}}, TakenBy: "n1"}
}

func write(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, header(data))
	if err != nil {
		t.Fatal(err)
	}
	for part := range slices.Chunk(data, 7) {
		if _, err := w.Write(part); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	data := bytes.Repeat([]byte("state "), 100)
	file := write(t, data)
	var got bytes.Buffer
	h, err := Read(bytes.NewReader(file), &got)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(h, header(data)) || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("read back header %v and %d bytes", h, got.Len())
	}
	sum := sha256.Sum256(file[:len(file)-sha256.Size])
	if !bytes.Equal(file[len(file)-sha256.Size:], sum[:]) {
		t.Fatal("the file does not end with the SHA-256 of the rest")
	}
}

// Every byte flipped and every length cut short is refused, each with the
// error that says why; so is a byte after the checksum, and another
// format's version.
func TestDamagedFilesAreRefused(t *testing.T) {
	data := bytes.Repeat([]byte("state "), 20)
	file := write(t, data)
	for i := range file {
		bad := bytes.Clone(file)
		bad[i] ^= 0x20
		_, err := Read(bytes.NewReader(bad), io.Discard)
		switch {
		case i < len(Magic):
			if !errors.Is(err, ErrNotBackup) {
				t.Fatalf("byte %d of the magic flipped: %v", i, err)
			}
		case err == nil:
			t.Fatalf("byte %d flipped: read without error", i)
		}
	}
	for n := range len(file) {
		_, err := Read(bytes.NewReader(file[:n]), io.Discard)
		want := ErrTruncated
		if n == 0 {
			want = ErrNotBackup
		}
		if !errors.Is(err, want) {
			t.Fatalf("cut to %d of %d bytes: %v, want %v", n, len(file), err, want)
		}
	}
	if _, err := Read(bytes.NewReader(append(bytes.Clone(file), 0)), io.Discard); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a byte after the checksum: %v", err)
	}
	newer := bytes.Clone(file)
	binary.BigEndian.PutUint32(newer[len(Magic):], FormatVersion+1)
	if _, err := Read(bytes.NewReader(newer), io.Discard); !errors.Is(err, ErrFormat) {
		t.Fatalf("format version %d: %v", FormatVersion+1, err)
	}
	if _, err := Read(bytes.NewReader([]byte("{\"json\": true}")), io.Discard); !errors.Is(err, ErrNotBackup) {
		t.Fatalf("a JSON file: %v", err)
	}
}

// The writer writes no checksum over data other than the header's.
func TestWriterChecksTheData(t *testing.T) {
	data := []byte("the state")
	for _, tc := range []struct {
		name  string
		write []byte
		want  error
	}{
		{"short", data[:4], ErrTruncated},
		{"other bytes", []byte("the stata"), ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			w, err := NewWriter(&buf, header(data))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write(tc.write); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); !errors.Is(err, tc.want) {
				t.Fatalf("close: %v, want %v", err, tc.want)
			}
		})
	}
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, header(data))
	if _, err := w.Write(append(bytes.Clone(data), '!')); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("more data than the header says: %v", err)
	}
}

// FuzzRead: any bytes are read without a panic, and a file Read accepts
// is written back by Writer into one Read accepts alike.
func FuzzRead(f *testing.F) {
	f.Add(write(f, []byte("state")))
	f.Add([]byte(Magic))
	f.Fuzz(func(t *testing.T, file []byte) {
		var data bytes.Buffer
		h, err := Read(bytes.NewReader(file), &data)
		if err != nil {
			return
		}
		var again bytes.Buffer
		w, err := NewWriter(&again, h)
		if err != nil {
			t.Fatalf("a header Read accepted is refused by NewWriter: %v", err)
		}
		if _, err := w.Write(data.Bytes()); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		var data2 bytes.Buffer
		h2, err := Read(bytes.NewReader(again.Bytes()), &data2)
		if err != nil || !proto.Equal(h, h2) || !bytes.Equal(data.Bytes(), data2.Bytes()) {
			t.Fatalf("written back, the file reads as %v, %v", h2, err)
		}
	})
}
