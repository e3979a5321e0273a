package storage

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/raftwire"
)

// fdatasync is fdatasync(2) on Linux (F_FULLFSYNC on macOS).
var fdatasync = fileutil.Fdatasync

// The log is a sequence of segment files, <seq>-<first index>.log in
// fixed-width hex, each a run of records:
//
//	size  uint32 LE   bytes of type and payload (never 0)
//	^size uint32 LE   its complement: a damaged size is seen as damage,
//	                  not followed to a wrong end
//	crc   uint32 LE   CRC-32C of type and payload, chained from the
//	                  previous record's crc (0 before a segment's first)
//	type  byte        recHeader, recEntry, recState or recSnapshot
//	payload
//
// A segment starts with a header record (magic, seq and first index, which
// must match its name) and the hard state current when it was cut. A
// segment is zero-filled and synced before it is used, so an append writes
// into blocks the file system has already allocated and initialised, and
// fdatasync has no allocation metadata to commit (BenchmarkSave shows
// the difference on ext4). The file's modification time is still
// written, once per clock tick at most, where ext4 runs without a
// journal. A size of 0 ends a segment.
const (
	recHeader   byte = 1
	recEntry    byte = 2
	recState    byte = 3
	recSnapshot byte = 4

	headSize = 12 // size, ^size, crc

	// maxRecord bounds a record's size: a larger size field is damage.
	maxRecord = 256 << 20

	// sectorSize is the unit a disk writes atomically. A record whose
	// check fails was torn by a crash in the middle of its write if a
	// sector it reaches into is all zeros from where the record starts
	// in it (a sector that never reached the disk); otherwise it is
	// corrupt. Only the last segment can have a torn record.
	sectorSize = 512

	// directBlock is the alignment of direct writes to the log: their
	// offset, length and memory. 4096 is every common disk's logical block
	// or a multiple of it.
	directBlock = 4096

	// holdUnsynced bounds the bytes of unsynced saves a log writing
	// directly keeps in memory for its next synced write.
	holdUnsynced = 64 << 10

	logExt = ".log"
	// prepName is the segment being zero-filled for the next cut.
	prepName = "next.tmp"
)

var (
	crcTable    = crc32.MakeTable(crc32.Castagnoli)
	headerMagic = []byte("baton-log/1\n")
)

// Segment sizes: the first segment a log opens is minSegment bytes and
// each next one twice its predecessor, up to maxSegment. Small stores
// (tests, idle clusters) then zero-fill little, and a busy one soon cuts
// rarely. Variables so that tests can shrink them.
var (
	minSegment int64 = 1 << 20
	maxSegment int64 = 64 << 20
)

// directIO makes the log write with direct I/O where the file system
// takes it (flushDirect). A variable so that tests cover both ways.
var directIO = true

// errCorrupt marks damage the log does not repair by itself.
var errCorrupt = errors.New("log corrupt")

type segment struct {
	seq, first uint64
	name       string
}

func segmentName(seq, first uint64) string { return fmt.Sprintf("%016x-%016x%s", seq, first, logExt) }

func parseSegmentName(name string) (segment, bool) {
	var s segment
	base, ok := strings.CutSuffix(name, logExt)
	if !ok || len(base) != 33 || base[16] != '-' {
		return s, false
	}
	if _, err := fmt.Sscanf(base, "%016x-%016x", &s.seq, &s.first); err != nil {
		return s, false
	}
	s.name = name
	return s, true
}

// listSegments returns the segments in dir in sequence order, and fails if
// a sequence number is missing in between.
func listSegments(dir string) ([]segment, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var segs []segment
	for _, de := range des {
		if s, ok := parseSegmentName(de.Name()); ok {
			segs = append(segs, s)
		}
	}
	slices.SortFunc(segs, func(a, b segment) int { return cmp.Compare(a.seq, b.seq) })
	for i := 1; i < len(segs); i++ {
		if segs[i].seq != segs[i-1].seq+1 {
			return nil, fmt.Errorf("%w: segment %d missing before %s", errCorrupt, segs[i-1].seq+1, segs[i].name)
		}
	}
	return segs, nil
}

// readSegment calls fn for every record of the segment at path, in order,
// and returns the offset just past the last good record. A record that
// fails its check ends the log if the segment is the last one and the
// record looks torn (see sectorSize); then torn is true. Anything else
// that fails is errCorrupt. The payload passed to fn is reused after fn
// returns.
func readSegment(path string, last bool, fn func(typ byte, payload []byte) error) (end int64, torn bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var (
		hdr [headSize]byte
		buf []byte
		crc uint32
	)
	// bad decides between a torn tail and damage, for a record that
	// failed at offset end, of which data (at offset at) was read.
	bad := func(what string, data []byte, at int64) (int64, bool, error) {
		if last && tornAt(data, at, r) {
			return end, true, nil
		}
		return end, false, fmt.Errorf("%w: %s at offset %d of %s", errCorrupt, what, end, filepath.Base(path))
	}
	for {
		n, err := io.ReadFull(r, hdr[:])
		switch {
		case err == io.EOF:
			return end, false, nil
		case errors.Is(err, io.ErrUnexpectedEOF):
			if allZero(hdr[:n]) {
				return end, false, nil
			}
			return bad("record header cut short", nil, 0)
		case err != nil:
			return end, false, err
		}
		size := binary.LittleEndian.Uint32(hdr[0:4])
		if size == 0 && allZero(hdr[:]) {
			return end, false, nil // the zero-filled rest of the segment
		}
		if size == 0 || size != ^binary.LittleEndian.Uint32(hdr[4:8]) || size > maxRecord {
			return bad("damaged record header", hdr[:], end)
		}
		if cap(buf) < int(size) {
			buf = make([]byte, size)
		}
		buf = buf[:size]
		if _, err := io.ReadFull(r, buf); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return bad("record cut short", nil, 0)
			}
			return end, false, err
		}
		next := crc32.Update(crc, crcTable, buf)
		if next != binary.LittleEndian.Uint32(hdr[8:12]) {
			return bad("checksum mismatch", buf, end+headSize)
		}
		crc = next
		if err := fn(buf[0], buf[1:]); err != nil {
			return end, false, fmt.Errorf("record at offset %d of %s: %w", end, filepath.Base(path), err)
		}
		end += headSize + int64(size)
	}
}

// tornAt reports whether data, read from file offset at and followed in
// the file by what r holds next, reaches into a sector that is all zeros
// from where data starts in it: the crash kept that sector from the disk.
// Data cut short by the end of the file (nil) is torn too.
func tornAt(data []byte, at int64, r *bufio.Reader) bool {
	if data == nil {
		return true
	}
	for len(data) > 0 {
		n := min(int(sectorSize-at%sectorSize), len(data))
		if allZero(data[:n]) {
			if n < len(data) {
				return true
			}
			// The record ends inside this sector: the rest of the sector
			// must be zeros too, as it was before the lost write.
			rest, _ := r.Peek(int(sectorSize - (at+int64(n))%sectorSize))
			return allZero(rest)
		}
		data, at = data[n:], at+int64(n)
	}
	return false
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// appendRecord appends one record to buf, chained from *crc.
func appendRecord(buf []byte, crc *uint32, typ byte, m proto.Message, raw []byte) ([]byte, error) {
	start := len(buf)
	buf = append(buf, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, typ)
	var fast bool
	if e, ok := m.(*raftpb.Entry); ok {
		buf, fast = raftwire.AppendEntry(buf, e)
	}
	if !fast && m != nil {
		var err error
		if buf, err = (proto.MarshalOptions{}).MarshalAppend(buf, m); err != nil {
			return buf[:start], err
		}
	} else {
		buf = append(buf, raw...)
	}
	size := len(buf) - start - headSize
	if size > maxRecord {
		return buf[:start], fmt.Errorf("record of %d bytes is over the %d-byte limit", size, maxRecord)
	}
	binary.LittleEndian.PutUint32(buf[start:], uint32(size))
	binary.LittleEndian.PutUint32(buf[start+4:], ^uint32(size))
	*crc = crc32.Update(*crc, crcTable, buf[start+headSize:])
	binary.LittleEndian.PutUint32(buf[start+8:], *crc)
	return buf, nil
}

func headerPayload(seq, first uint64) []byte {
	b := append([]byte(nil), headerMagic...)
	b = binary.BigEndian.AppendUint64(b, seq)
	return binary.BigEndian.AppendUint64(b, first)
}

func checkHeader(payload []byte, s segment) error {
	want := headerPayload(s.seq, s.first)
	if string(payload) != string(want) {
		return fmt.Errorf("%w: %s has a header that does not match its name", errCorrupt, s.name)
	}
	return nil
}

// zeroFile creates path (replacing any file there) with size zero bytes,
// synced, and returns it open for writing. It gives up when stop is set.
func zeroFile(path string, size int64, stop *atomic.Bool) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	zeros := make([]byte, min(size, 1<<20))
	for off := int64(0); off < size; off += int64(len(zeros)) {
		if stop.Load() {
			f.Close()
			os.Remove(path)
			return nil, errors.New("stopped")
		}
		n := min(int64(len(zeros)), size-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			f.Close()
			os.Remove(path)
			return nil, err
		}
		// Sync every 8 MB: a whole segment's zeros in one flush would
		// stall the log's own syncs on the same disk for as long.
		if (off+n)%(8<<20) == 0 || off+n == size {
			if err := fdatasync(f); err != nil {
				f.Close()
				os.Remove(path)
				return nil, err
			}
		}
	}
	return f, nil
}

// syncDir makes the directory entries of dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func decodeEntry(p []byte) (*raftpb.Entry, error) {
	e := &raftpb.Entry{}
	if err := proto.Unmarshal(p, e); err != nil {
		return nil, fmt.Errorf("%w: entry: %v", errCorrupt, err)
	}
	return e, nil
}
