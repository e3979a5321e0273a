package storage

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"unsafe"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// wlog is the write-ahead log of a Store: hard states, entries and
// snapshot records in segment files (format in segment.go). It is not safe
// for concurrent use; the Store serialises calls.
type wlog struct {
	dir string
	log *slog.Logger

	segs      []segment // oldest first; the last one is f
	f         *os.File
	off       int64  // where the next record goes in f
	size      int64  // f's zero-filled size
	headerEnd int64  // the end of f's header and hard state records
	crc       uint32 // the last record's crc in f
	// lastIndex is the index of the last entry written (or of a newer
	// snapshot): the next segment is named after lastIndex+1.
	lastIndex uint64
	hs        *raftpb.HardState // the last hard state written, nil if none
	buf       []byte

	// Direct writes (see flushDirect). df is f opened with O_DIRECT, nil
	// when the log writes through the page cache; tail holds the bytes of
	// the block that off falls in, up to off; scratch is the block-aligned
	// buffer writes are assembled in; unsynced marks a direct write not
	// yet made durable.
	df       *os.File
	noDirect bool // the file system refused direct I/O: do not try again
	tail     []byte
	scratch  []byte
	unsynced bool

	nextSize int64
	prep     chan prepared // the next segment being zero-filled
	stopPrep atomic.Bool

	syncs atomic.Uint64
	err   error // the first write error: the log's state is unknown after it
}

type prepared struct {
	f    *os.File
	size int64
	err  error
}

// logScan is what the first pass over a log found.
type logScan struct {
	snaps []*raftpb.SnapshotMetadata // snapshot records, in log order
	hs    *raftpb.HardState          // the last hard state, nil if none
}

// openWlog opens the log in dir, creating it if needed: it reads every
// segment once to find the snapshot records, the last hard state and the
// last entry's index, repairs a torn tail (see readSegment) by cutting the
// last segment at its last good record, after keeping a copy of the
// segment as <name>.broken, and starts a new segment for appends. Damage
// other than a torn tail is an error.
func openWlog(dir string, log *slog.Logger) (*wlog, *logScan, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	os.Remove(filepath.Join(dir, prepName)) // half-prepared, maybe
	segs, err := listSegments(dir)
	if err != nil {
		return nil, nil, err
	}
	w := &wlog{dir: dir, log: log, nextSize: minSegment}
	sc := &logScan{}
	for len(segs) > 0 {
		// A last segment whose header never reached the disk holds
		// nothing: the crash came during its cut. Drop it.
		last := segs[len(segs)-1]
		ok, err := hasHeader(filepath.Join(dir, last.name), last)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			break
		}
		log.Warn("removing a log segment cut by a crash before its header was written", "segment", last.name)
		if err := os.Remove(filepath.Join(dir, last.name)); err != nil {
			return nil, nil, err
		}
		segs = segs[:len(segs)-1]
	}
	for i, s := range segs {
		last := i == len(segs)-1
		path := filepath.Join(dir, s.name)
		first := true
		end, torn, err := readSegment(path, last, func(typ byte, p []byte) error {
			if first {
				first = false
				if typ != recHeader {
					return fmt.Errorf("%w: %s does not start with a header", errCorrupt, s.name)
				}
				return checkHeader(p, s)
			}
			switch typ {
			case recEntry:
				idx, err := entryIndex(p)
				if err != nil {
					return err
				}
				w.lastIndex = idx
			case recState:
				hs := &raftpb.HardState{}
				if err := proto.Unmarshal(p, hs); err != nil {
					return fmt.Errorf("%w: hard state: %v", errCorrupt, err)
				}
				sc.hs = hs
			case recSnapshot:
				md := &raftpb.SnapshotMetadata{}
				if err := proto.Unmarshal(p, md); err != nil {
					return fmt.Errorf("%w: snapshot record: %v", errCorrupt, err)
				}
				sc.snaps = append(sc.snaps, md)
				w.lastIndex = max(w.lastIndex, md.GetIndex())
			default:
				return fmt.Errorf("%w: record type %d", errCorrupt, typ)
			}
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
		if last {
			if torn {
				log.Warn("torn write at the end of the log, cutting it off", "segment", s.name, "offset", end)
				if err := copyFile(path, path+".broken"); err != nil {
					return nil, nil, fmt.Errorf("keep a copy of the torn segment: %w", err)
				}
			}
			// Cut the segment at its end, so that nothing after its last
			// record (a torn write, or the zero fill) is ever read as
			// part of the log once it is no longer the last segment.
			if err := truncateSync(path, end); err != nil {
				return nil, nil, err
			}
		}
	}
	w.segs = segs
	w.hs = sc.hs
	w.startPrep()
	if err := w.cut(); err != nil {
		w.close()
		return nil, nil, err
	}
	if err := w.flush(true); err != nil {
		w.close()
		return nil, nil, err
	}
	return w, sc, nil
}

// hasHeader reports whether the segment at path starts with a good header,
// or has no record at all (zeros, or a torn first record). A first record
// that is whole but not the right header is an error.
func hasHeader(path string, s segment) (bool, error) {
	read := false
	_, _, err := readSegment(path, true, func(typ byte, p []byte) error {
		read = true
		if typ != recHeader {
			return fmt.Errorf("%w: %s does not start with a header", errCorrupt, s.name)
		}
		if err := checkHeader(p, s); err != nil {
			return err
		}
		return io.EOF // one record is enough
	})
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	return read, nil
}

// entryIndex reads an entry record's index without decoding the entry.
func entryIndex(p []byte) (uint64, error) {
	for len(p) > 0 {
		num, typ, n := protowire.ConsumeTag(p)
		if n < 0 {
			break
		}
		p = p[n:]
		if num == 3 && typ == protowire.VarintType { // raftpb.Entry.Index
			v, n := protowire.ConsumeVarint(p)
			if n < 0 {
				break
			}
			return v, nil
		}
		n = protowire.ConsumeFieldValue(num, typ, p)
		if n < 0 {
			break
		}
		p = p[n:]
	}
	return 0, fmt.Errorf("%w: entry record without an index", errCorrupt)
}

// entriesAfter reads the log's entries with index > after, in index order,
// with overwritten suffixes discarded: an entry at index i replaces every
// entry at i or above read before it. It reads from the last segment named
// at or below after+1 (one that the release of the log keeps).
func (w *wlog) entriesAfter(after uint64) ([]*raftpb.Entry, error) {
	start := 0
	for i, s := range w.segs {
		if s.first <= after+1 {
			start = i
		}
	}
	var ents []*raftpb.Entry
	for i, s := range w.segs[start:] {
		last := start+i == len(w.segs)-1
		_, _, err := readSegment(filepath.Join(w.dir, s.name), last, func(typ byte, p []byte) error {
			if typ != recEntry {
				return nil
			}
			e, err := decodeEntry(p)
			if err != nil {
				return err
			}
			if e.GetIndex() <= after {
				return nil
			}
			off := e.GetIndex() - after - 1
			if off > uint64(len(ents)) {
				return fmt.Errorf("%w: entry %d follows entry %d", errCorrupt, e.GetIndex(), after+uint64(len(ents)))
			}
			ents = append(ents[:off], e)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return ents, nil
}

// save appends ents and then hs (either may be empty); with sync they are
// durable on return.
func (w *wlog) save(hs *raftpb.HardState, ents []*raftpb.Entry, sync bool) error {
	if w.err != nil {
		return w.err
	}
	for _, e := range ents {
		if err := w.add(recEntry, e, nil); err != nil {
			return w.fail(err)
		}
		w.lastIndex = e.GetIndex()
	}
	if hs != nil {
		if err := w.add(recState, hs, nil); err != nil {
			return w.fail(err)
		}
		w.hs = proto.CloneOf(hs)
	}
	if !sync && w.df != nil && len(w.buf) < holdUnsynced {
		// Nothing waits for these bytes to be durable (raft's commit
		// index alone): they go out with the next synced write, where a
		// write of their own would cost the device a trip.
		return nil
	}
	return w.fail(w.flush(sync))
}

// saveSnapshot appends a snapshot record and syncs.
func (w *wlog) saveSnapshot(md *raftpb.SnapshotMetadata) error {
	if w.err != nil {
		return w.err
	}
	if err := w.add(recSnapshot, md, nil); err != nil {
		return w.fail(err)
	}
	w.lastIndex = max(w.lastIndex, md.GetIndex())
	return w.fail(w.flush(true))
}

func (w *wlog) fail(err error) error {
	if err != nil && w.err == nil {
		w.err = fmt.Errorf("log unusable after a failed write: %w", err)
	}
	return err
}

// add appends a record to the buffer; a record that does not fit in the
// current segment goes first in the next one (a record larger than a whole
// segment gets one to itself, grown past its zero fill).
func (w *wlog) add(typ byte, m proto.Message, raw []byte) error {
	start, crc := len(w.buf), w.crc
	var err error
	if w.buf, err = appendRecord(w.buf, &w.crc, typ, m, raw); err != nil {
		return err
	}
	if w.off+int64(len(w.buf)) <= w.size || w.off+int64(start) <= w.headerEnd {
		return nil
	}
	w.buf, w.crc = w.buf[:start], crc
	if err := w.flush(false); err != nil {
		return err
	}
	if err := w.cut(); err != nil {
		return err
	}
	w.buf, err = appendRecord(w.buf, &w.crc, typ, m, raw)
	return err
}

// flush writes the buffer at the end of the segment, and syncs if asked.
func (w *wlog) flush(sync bool) error {
	if w.df != nil {
		return w.flushDirect(sync)
	}
	if len(w.buf) > 0 {
		if _, err := w.f.WriteAt(w.buf, w.off); err != nil {
			return err
		}
		w.off += int64(len(w.buf))
		if cap(w.buf) > 4<<20 {
			w.buf = nil // do not keep a rare huge batch's buffer
		} else {
			w.buf = w.buf[:0]
		}
	}
	if sync {
		if err := fdatasync(w.f); err != nil {
			return err
		}
		w.syncs.Add(1)
	}
	return nil
}

// cut ends the current segment (synced, so that the log has no hole if
// the next one's records reach the disk and these do not) and starts the
// prepared one, named after lastIndex+1, with a header and the hard state.
// The buffer must be empty.
func (w *wlog) cut() error {
	if w.f != nil {
		if err := fdatasync(w.f); err != nil {
			return err
		}
		w.syncs.Add(1)
		w.unsynced = false
		if err := w.closeFiles(); err != nil {
			return err
		}
	}
	p := <-w.prep
	w.prep = nil
	if p.err != nil {
		return fmt.Errorf("prepare a log segment: %w", p.err)
	}
	s := segment{first: w.lastIndex + 1}
	if n := len(w.segs); n > 0 {
		s.seq = w.segs[n-1].seq + 1
	}
	s.name = segmentName(s.seq, s.first)
	var err error
	if err = os.Rename(filepath.Join(w.dir, prepName), filepath.Join(w.dir, s.name)); err != nil {
		p.f.Close()
		return err
	}
	if err := syncDir(w.dir); err != nil {
		p.f.Close()
		return err
	}
	w.segs = append(w.segs, s)
	w.f, w.off, w.size, w.crc = p.f, 0, p.size, 0
	w.tail = w.tail[:0]
	if directIO && !w.noDirect {
		if w.df, err = openDirect(filepath.Join(w.dir, s.name)); err != nil {
			w.log.Info("the log writes through the page cache: the file system refused direct I/O", "err", err)
			w.noDirect, w.df = true, nil
		}
	}
	w.startPrep()
	if w.buf, err = appendRecord(w.buf, &w.crc, recHeader, nil, headerPayload(s.seq, s.first)); err != nil {
		return err
	}
	if w.hs != nil {
		if w.buf, err = appendRecord(w.buf, &w.crc, recState, w.hs, nil); err != nil {
			return err
		}
	}
	w.headerEnd = int64(len(w.buf))
	w.log.Debug("cut a log segment", "segment", s.name, "size", p.size)
	return nil
}

// startPrep zero-fills the next segment in the background.
func (w *wlog) startPrep() {
	size := w.nextSize
	w.nextSize = min(maxSegment, 2*size)
	ch := make(chan prepared, 1)
	w.prep = ch
	path := filepath.Join(w.dir, prepName)
	go func() {
		f, err := zeroFile(path, size, &w.stopPrep)
		ch <- prepared{f: f, size: size, err: err}
	}()
}

// release deletes the segments that hold only entries at or below index
// (the previous snapshot's), except the newest KeepWALFiles.
func (w *wlog) release(index uint64) {
	keep := 0 // the last segment named at or below index holds entry index
	for i, s := range w.segs {
		if s.first <= index {
			keep = i
		}
	}
	keep = min(keep, max(0, len(w.segs)-KeepWALFiles))
	for _, s := range w.segs[:keep] {
		if err := os.Remove(filepath.Join(w.dir, s.name)); err != nil && !os.IsNotExist(err) {
			w.log.Warn("remove old log segment", "segment", s.name, "err", err)
			keep = 0
			break
		}
		w.log.Debug("removed old log segment", "segment", s.name)
	}
	w.segs = append(w.segs[:0:0], w.segs[keep:]...)
}

// close syncs and closes the log and drops the prepared segment.
func (w *wlog) close() error {
	var err error
	if w.f != nil {
		if w.err == nil {
			err = w.flush(true)
		}
		if cerr := w.closeFiles(); err == nil {
			err = cerr
		}
	}
	if w.prep != nil {
		w.stopPrep.Store(true)
		if p := <-w.prep; p.f != nil {
			p.f.Close()
		}
		os.Remove(filepath.Join(w.dir, prepName))
		w.prep = nil
	}
	return err
}

func truncateSync(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return err
	}
	return fdatasync(f)
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// closeFiles closes the current segment's files without writing.
func (w *wlog) closeFiles() error {
	err := w.f.Close()
	if w.df != nil {
		if cerr := w.df.Close(); err == nil {
			err = cerr
		}
	}
	w.f, w.df = nil, nil
	return err
}

// flushDirect is flush for a segment open for direct I/O. The disk takes
// whole aligned blocks only, so a write starts at the block that off falls
// in, repeating the bytes before off in it (tail), and ends at a block
// boundary with zeros, which is what the zero-filled segment holds there:
// the bytes before off are rewritten unchanged, and a crash that tears
// the write leaves each sector old or new, as in a write through the page
// cache. A synced write is one write with RWF_DSYNC (see pwriteDirect):
// one trip to the device and fewer system calls than a write and an
// fdatasync.
func (w *wlog) flushDirect(sync bool) error {
	if len(w.buf) == 0 {
		if !sync {
			return nil
		}
		if err := fdatasync(w.df); err != nil {
			return err
		}
		w.syncs.Add(1)
		w.unsynced = false
		return nil
	}
	start := w.off - int64(len(w.tail))
	end := len(w.tail) + len(w.buf)
	size := (end + directBlock - 1) &^ (directBlock - 1)
	b := w.alignedScratch(size)
	copy(b, w.tail)
	copy(b[len(w.tail):], w.buf)
	clear(b[end:])
	// An earlier unsynced direct write is made durable only by a cache
	// flush of the whole device: RWF_DSYNC may cover this write alone.
	dsync := sync && !w.unsynced
	if err := writeDirect(w.df, b, start, dsync); err != nil {
		if errors.Is(err, syscall.EINVAL) {
			// Alignment the file system does not take after all: write
			// through the page cache from now on. It sees the blocks
			// already written directly, and its fdatasync flushes the
			// device's cache, earlier unsynced direct writes included.
			w.log.Info("the log writes through the page cache: a direct write was refused", "err", err)
			w.df.Close()
			w.df, w.noDirect = nil, true
			return w.flush(sync)
		}
		return err
	}
	w.tail = append(w.tail[:0], b[end&^(directBlock-1):end]...)
	w.off += int64(len(w.buf))
	if cap(w.buf) > 4<<20 {
		w.buf, w.scratch = nil, nil // do not keep a rare huge batch's buffers
	} else {
		w.buf = w.buf[:0]
	}
	switch {
	case dsync:
		w.syncs.Add(1)
	case sync:
		if err := fdatasync(w.df); err != nil {
			return err
		}
		w.syncs.Add(1)
		w.unsynced = false
	default:
		w.unsynced = true
	}
	return nil
}

// alignedScratch returns w.scratch resized to size bytes, starting at a
// block-aligned address.
func (w *wlog) alignedScratch(size int) []byte {
	if cap(w.scratch) < size {
		raw := make([]byte, size+directBlock)
		skip := (directBlock - int(uintptr(unsafe.Pointer(unsafe.SliceData(raw)))&(directBlock-1))) & (directBlock - 1)
		w.scratch = raw[skip : skip : skip+size]
	}
	return w.scratch[:size]
}
