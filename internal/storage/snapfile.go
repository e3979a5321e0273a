package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// A snapshot file, <term>-<index>.snap in fixed-width hex (the names etcd's
// snapshotter used, so lexical order is age order):
//
//	magic     "baton-snap/1\n"
//	mdLen     uint32 LE, then mdLen bytes of raftpb.SnapshotMetadata
//	dataLen   uint64 LE, then dataLen bytes of snapshot data
//	crc       uint32 LE, CRC-32C of everything before it
//
// The data is written from the caller's slice as it is: etcd's
// snapshotter marshalled the snapshot twice (into raftpb.Snapshot, then
// into its checksummed envelope), two extra copies of a state that is
// about 100 MB at a million locks, made while the Ready loop waits. A file
// without the magic is one of etcd's, from an older release, and is read
// with etcd's reader.
var snapMagic = []byte("baton-snap/1\n")

const snapExt = ".snap"

func snapName(term, index uint64) string {
	return fmt.Sprintf("%016x-%016x%s", term, index, snapExt)
}

func parseSnapName(name string) (term, index uint64, ok bool) {
	base, ok := strings.CutSuffix(name, snapExt)
	if !ok || len(base) != 33 || base[16] != '-' {
		return 0, 0, false
	}
	if _, err := fmt.Sscanf(base, "%016x-%016x", &term, &index); err != nil {
		return 0, 0, false
	}
	return term, index, true
}

// writeSnapshot writes sn into dir, synced, under its final name only once
// it is whole.
func writeSnapshot(dir string, sn *raftpb.Snapshot) error {
	md := sn.GetMetadata()
	mdBytes, err := proto.Marshal(md)
	if err != nil {
		return err
	}
	head := append([]byte(nil), snapMagic...)
	head = binary.LittleEndian.AppendUint32(head, uint32(len(mdBytes)))
	head = append(head, mdBytes...)
	head = binary.LittleEndian.AppendUint64(head, uint64(len(sn.GetData())))
	crc := crc32.Update(0, crcTable, head)
	crc = crc32.Update(crc, crcTable, sn.GetData())
	tail := binary.LittleEndian.AppendUint32(nil, crc)

	name := snapName(md.GetTerm(), md.GetIndex())
	tmp := filepath.Join(dir, name+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err = f.Write(head); err == nil {
		err = writeFlushed(f, sn.GetData())
	}
	if err == nil {
		_, err = f.Write(tail)
	}
	if err == nil {
		err = fdatasync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

// snapFlushEvery is how much of a snapshot is written between syncs.
var snapFlushEvery = 8 << 20 // a variable for tests

// writeFlushed writes data to f, syncing after every snapFlushEvery bytes.
// The log shares the disk: a snapshot written at once leaves all of it to
// flush in one go, and a log sync issued meanwhile waits for all of it;
// written in pieces, a log sync waits for one piece at most.
func writeFlushed(f *os.File, data []byte) error {
	for len(data) > 0 {
		n := min(len(data), snapFlushEvery)
		if _, err := f.Write(data[:n]); err != nil {
			return err
		}
		data = data[n:]
		if len(data) > 0 {
			if err := fdatasync(f); err != nil {
				return err
			}
		}
	}
	return nil
}

// readSnapshot reads the snapshot file at path, in either format.
func readSnapshot(path string, log *slog.Logger) (*raftpb.Snapshot, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(b, snapMagic) {
		return snap.Read(newZapLogger(log), path)
	}
	bad := func(what string) (*raftpb.Snapshot, error) {
		return nil, fmt.Errorf("%w: snapshot %s: %s", errCorrupt, filepath.Base(path), what)
	}
	p := b[len(snapMagic):]
	if len(p) < 4 {
		return bad("cut short")
	}
	mdLen := uint64(binary.LittleEndian.Uint32(p))
	p = p[4:]
	if uint64(len(p)) < mdLen+8 {
		return bad("cut short")
	}
	md := &raftpb.SnapshotMetadata{}
	if err := proto.Unmarshal(p[:mdLen], md); err != nil {
		return bad(err.Error())
	}
	p = p[mdLen:]
	dataLen := binary.LittleEndian.Uint64(p)
	p = p[8:]
	if uint64(len(p)) != dataLen+4 {
		return bad(fmt.Sprintf("%d bytes of data and checksum, want %d", len(p), dataLen+4))
	}
	if crc32.Checksum(b[:len(b)-4], crcTable) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return bad("checksum mismatch")
	}
	return &raftpb.Snapshot{Metadata: md, Data: p[:dataLen:dataLen]}, nil
}

// loadNewestSnapshot returns the newest snapshot in dir for which match
// (of its term and index) is true, or snap.ErrNoSnapshot. A file that
// cannot be read is renamed <name>.broken, logged, and skipped, as etcd's
// snapshotter does.
func loadNewestSnapshot(dir string, log *slog.Logger, match func(term, index uint64) bool) (*raftpb.Snapshot, error) {
	names, err := snapNames(dir)
	if err != nil {
		return nil, err
	}
	for _, name := range slices.Backward(names) {
		term, index, _ := parseSnapName(name)
		if !match(term, index) {
			continue
		}
		path := filepath.Join(dir, name)
		sn, err := readSnapshot(path, log)
		if err == nil && (sn.GetMetadata().GetTerm() != term || sn.GetMetadata().GetIndex() != index) {
			err = fmt.Errorf("%w: snapshot %s holds %d/%d", errCorrupt, name, sn.GetMetadata().GetTerm(), sn.GetMetadata().GetIndex())
		}
		if err != nil {
			log.Warn("unreadable snapshot, skipping it", "file", name, "err", err)
			if rerr := os.Rename(path, path+".broken"); rerr != nil {
				log.Warn("set aside unreadable snapshot", "file", name, "err", rerr)
			}
			continue
		}
		return sn, nil
	}
	return nil, snap.ErrNoSnapshot
}

// snapNames lists the snapshot files in dir, oldest first, and removes
// the temporary files of writes a crash cut short.
func snapNames(dir string) ([]string, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, de := range des {
		n := de.Name()
		if _, _, ok := parseSnapName(n); ok {
			names = append(names, n)
		} else if strings.HasSuffix(n, snapExt+".tmp") {
			os.Remove(filepath.Join(dir, n))
		}
	}
	slices.Sort(names)
	return names, nil
}
