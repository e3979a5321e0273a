package fsm

import (
	"cmp"
	"fmt"
	"slices"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/api/protofield"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// Member is one member of the Raft group: its Raft id, name and peer
// address. The Machine keeps the members the log's membership changes
// named (raftnode calls SetMember and RemoveMember as it applies them), so
// they travel in snapshots to members that never saw those entries.
type Member struct {
	ID       uint64
	Name     string
	PeerAddr string
	// Removed marks a member removed from the group: its record stays, so
	// that its id is never given to a member again.
	Removed bool
}

// SetMember records m (adding it, or replacing the record of its id).
func (mc *Machine) SetMember(m Member) {
	if mc.members == nil {
		mc.members = make(map[uint64]Member)
	}
	mc.members[m.ID] = m
}

// RemoveMember marks member id removed (recording it if it was not).
func (mc *Machine) RemoveMember(id uint64) {
	m := mc.members[id]
	m.ID, m.Removed = id, true
	mc.SetMember(m)
}

// SetClusterID records the cluster's id, from its bootstrap's records;
// the first one recorded stays.
func (mc *Machine) SetClusterID(id uint64) {
	if mc.clusterID == 0 {
		mc.clusterID = id
	}
}

// ClusterID is the cluster's id, 0 if its bootstrap recorded none.
func (mc *Machine) ClusterID() uint64 { return mc.clusterID }

// Members returns the recorded members by id, removed ones included.
func (mc *Machine) Members() []Member {
	out := make([]Member, 0, len(mc.members))
	for _, m := range mc.members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// appendMembers appends ms (sorted by id) as the snapshot's members field.
func appendMembers(b []byte, ms []Member) []byte {
	for _, m := range ms {
		rec, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&fsmpb.Member{Id: m.ID, Name: m.Name, PeerAddr: m.PeerAddr, Removed: m.Removed})
		b = protofield.AppendPresentBytes(b, snapshotMembers, rec)
	}
	return b
}

// loadMember checks and records one member of a snapshot; prev is the id
// of the one before (ids ascend).
func (mc *Machine) loadMember(rec []byte, prev uint64) (uint64, error) {
	var p fsmpb.Member
	if err := decodeRecord(rec, &p); err != nil {
		return 0, err
	}
	switch {
	case p.GetId() == 0:
		return 0, fmt.Errorf("member %q has id 0", p.GetName())
	case p.GetId() <= prev:
		return 0, fmt.Errorf("member %d after member %d: not in id order", p.GetId(), prev)
	case !utf8.ValidString(p.GetName()) || !utf8.ValidString(p.GetPeerAddr()):
		return 0, fmt.Errorf("member %d: name or address is not UTF-8", p.GetId())
	}
	mc.SetMember(Member{ID: p.GetId(), Name: p.GetName(), PeerAddr: p.GetPeerAddr(), Removed: p.GetRemoved()})
	return p.GetId(), nil
}

// Reseed gives the state a new cluster's identity: members replace every
// member record and clusterID the cluster's id. It is for seeding a new
// cluster from a backup (embed.Restore), before any entry applies, so
// that the new cluster's members find themselves, and not the old
// cluster's, in the state; it is never applied from the log.
func (mc *Machine) Reseed(clusterID uint64, members []Member) {
	mc.members = make(map[uint64]Member, len(members))
	for _, m := range members {
		mc.members[m.ID] = m
	}
	mc.clusterID = clusterID
}
