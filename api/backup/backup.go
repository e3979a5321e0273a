// Package backup is the file format of a Baton backup: what `baton
// snapshot save` writes, GET /v1/snapshot serves, and `baton snapshot
// status` and `baton snapshot restore` read. A file is
//
//	magic    8 bytes, "BATONBAK"
//	version  4 bytes, big-endian: the format's version (FormatVersion)
//	length   4 bytes, big-endian: the header's length, at most MaxHeaderBytes
//	header   a baton.v1.SnapshotHeader (protobuf): cluster id, applied
//	         index, term, log version, members, data size and its SHA-256
//	data     header.size bytes: the state machine's snapshot at that index
//	checksum 32 bytes: SHA-256 of everything before it
//
// Writer writes one; Read checks one whole before anything in it is
// used: a file that is not a backup, of a newer format, truncated, with
// trailing bytes, or whose checksum does not match is refused with an
// error saying which.
package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"

	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/api/batonpb"
)

// Magic opens every backup file.
const Magic = "BATONBAK"

// FormatVersion is the version of the format this package writes and
// the newest it reads.
const FormatVersion = 1

// MaxHeaderBytes bounds a header: a few hundred bytes a member.
const MaxHeaderBytes = 1 << 20

// prefixLen is the magic, version and header length.
const prefixLen = len(Magic) + 4 + 4

var (
	// ErrNotBackup: the file does not start with Magic.
	ErrNotBackup = errors.New("backup: not a Baton backup file (no BATONBAK at its start)")
	// ErrFormat: the file's format version is not one this release reads,
	// or its header is malformed.
	ErrFormat = errors.New("backup: unreadable format")
	// ErrTruncated: the file ends before its checksum.
	ErrTruncated = errors.New("backup: file is truncated")
	// ErrCorrupt: the file's checksum, or its data's, does not match its
	// contents, or bytes follow the checksum.
	ErrCorrupt = errors.New("backup: file is corrupt")
)

// Writer writes a backup file: NewWriter writes the header, Write the
// data, and Close the checksum once the data is all there and matches
// the header's size and SHA-256.
type Writer struct {
	w        io.Writer
	file     hash.Hash // everything written
	data     hash.Hash // the data
	size     uint64    // the header's
	want     []byte    // the header's data SHA-256
	written  uint64
	err      error
	finished bool
}

// NewWriter writes the file's magic, version and header h to w. h must
// state the data's size and SHA-256.
func NewWriter(w io.Writer, h *batonpb.SnapshotHeader) (*Writer, error) {
	if len(h.GetDataSha256()) != sha256.Size {
		return nil, fmt.Errorf("%w: the header's data_sha256 has %d bytes, want %d", ErrFormat, len(h.GetDataSha256()), sha256.Size)
	}
	hb, err := proto.MarshalOptions{Deterministic: true}.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("backup: encode header: %w", err)
	}
	if len(hb) > MaxHeaderBytes {
		return nil, fmt.Errorf("%w: header of %d bytes, over %d", ErrFormat, len(hb), MaxHeaderBytes)
	}
	bw := &Writer{w: w, file: sha256.New(), data: sha256.New(), size: h.GetSize(), want: h.GetDataSha256()}
	prefix := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32([]byte(Magic), FormatVersion), uint32(len(hb)))
	if err := bw.put(append(prefix, hb...)); err != nil {
		return nil, err
	}
	return bw, nil
}

func (bw *Writer) put(p []byte) error {
	if bw.err != nil {
		return bw.err
	}
	bw.file.Write(p)
	if _, err := bw.w.Write(p); err != nil {
		bw.err = err
	}
	return bw.err
}

// Write writes the next part of the data; more than the header's size is
// refused.
func (bw *Writer) Write(p []byte) (int, error) {
	if bw.finished {
		return 0, errors.New("backup: write after Close")
	}
	if uint64(len(p)) > bw.size-bw.written {
		return 0, fmt.Errorf("%w: more data than the header's %d bytes", ErrCorrupt, bw.size)
	}
	if err := bw.put(p); err != nil {
		return 0, err
	}
	bw.data.Write(p)
	bw.written += uint64(len(p))
	return len(p), nil
}

// Close checks that the data written is the header's (its size and
// SHA-256) and writes the checksum. It does not close the underlying
// writer.
func (bw *Writer) Close() error {
	if bw.finished {
		return bw.err
	}
	bw.finished = true
	switch {
	case bw.err != nil:
		return bw.err
	case bw.written != bw.size:
		bw.err = fmt.Errorf("%w: %d bytes of data, the header says %d", ErrTruncated, bw.written, bw.size)
		return bw.err
	case !bytes.Equal(bw.data.Sum(nil), bw.want):
		bw.err = fmt.Errorf("%w: the data's SHA-256 is not the header's", ErrCorrupt)
		return bw.err
	}
	if _, err := bw.w.Write(bw.file.Sum(nil)); err != nil {
		bw.err = err
	}
	return bw.err
}

// Read reads a whole backup file from r, copying its data to data as it
// goes, and returns its header once the file checked out: magic, format
// version, header, the data's size and SHA-256, the file's checksum, and
// nothing after it. On an error what was copied to data must not be
// used.
func Read(r io.Reader, data io.Writer) (*batonpb.SnapshotHeader, error) {
	file := sha256.New()
	tr := io.TeeReader(r, file)
	prefix := make([]byte, prefixLen)
	n, err := io.ReadFull(tr, prefix)
	if m := min(n, len(Magic)); n == 0 || string(prefix[:m]) != Magic[:m] {
		return nil, ErrNotBackup
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %d bytes, shorter than a header", ErrTruncated, n)
	}
	if v := binary.BigEndian.Uint32(prefix[len(Magic):]); v != FormatVersion {
		return nil, fmt.Errorf("%w: format version %d; this release reads %d (a newer release wrote it?)", ErrFormat, v, FormatVersion)
	}
	hlen := binary.BigEndian.Uint32(prefix[len(Magic)+4:])
	if hlen > MaxHeaderBytes {
		return nil, fmt.Errorf("%w: header length %d, over %d", ErrCorrupt, hlen, MaxHeaderBytes)
	}
	hb := make([]byte, hlen)
	if n, err := io.ReadFull(tr, hb); err != nil {
		return nil, fmt.Errorf("%w: the header stops after %d of its %d bytes", ErrTruncated, n, hlen)
	}
	h := &batonpb.SnapshotHeader{}
	if err := proto.Unmarshal(hb, h); err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrCorrupt, err)
	}
	if len(h.GetDataSha256()) != sha256.Size {
		return nil, fmt.Errorf("%w: the header's data SHA-256 has %d bytes", ErrCorrupt, len(h.GetDataSha256()))
	}
	sum := sha256.New()
	got, err := io.Copy(io.MultiWriter(data, sum), io.LimitReader(tr, int64(min(h.GetSize(), 1<<62))))
	if err != nil {
		return nil, fmt.Errorf("backup: read data: %w", err)
	}
	if uint64(got) != h.GetSize() {
		return nil, fmt.Errorf("%w: %d of the header's %d bytes of data", ErrTruncated, got, h.GetSize())
	}
	computed := file.Sum(nil)
	stored := make([]byte, sha256.Size)
	if n, err := io.ReadFull(r, stored); err != nil {
		return nil, fmt.Errorf("%w: %d of the checksum's %d bytes after the data", ErrTruncated, n, sha256.Size)
	}
	if !bytes.Equal(stored, computed) {
		return nil, fmt.Errorf("%w: its SHA-256 is %x, the checksum it ends with %x", ErrCorrupt, computed, stored)
	}
	if !bytes.Equal(sum.Sum(nil), h.GetDataSha256()) {
		return nil, fmt.Errorf("%w: the data's SHA-256 is not the header's", ErrCorrupt)
	}
	if n, _ := io.Copy(io.Discard, io.LimitReader(r, 1)); n > 0 {
		return nil, fmt.Errorf("%w: bytes follow its checksum", ErrCorrupt)
	}
	return h, nil
}
