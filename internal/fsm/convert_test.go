package fsm

import (
	"bytes"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/batonlock/baton/api/rules"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// fillAll sets every field of msg (recursively, one element per list) to
// a non-zero value.
func fillAll(msg protoreflect.Message) {
	fields := msg.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := msg.Mutable(fd).List()
			e := l.NewElement()
			fillAll(e.Message())
			l.Append(e)
		case fd.IsList():
			msg.Mutable(fd).List().Append(scalar(fd))
		case fd.Message() != nil:
			fillAll(msg.Mutable(fd).Message())
		default:
			msg.Set(fd, scalar(fd))
		}
	}
}

func scalar(fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("s")
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(1)
	case protoreflect.Int64Kind:
		return protoreflect.ValueOfInt64(7)
	case protoreflect.Uint32Kind:
		return protoreflect.ValueOfUint32(7)
	case protoreflect.Uint64Kind:
		return protoreflect.ValueOfUint64(7)
	case protoreflect.BytesKind: // the one bytes field is a secret's hash
		return protoreflect.ValueOfBytes(bytes.Repeat([]byte{7}, SecretHashLen))
	}
	panic("unexpected kind " + fd.Kind().String())
}

// TestConversionsKeepEveryField fails when a field added to the proto is
// not carried by the compact records and their conversions.
func TestConversionsKeepEveryField(t *testing.T) {
	// A cached result keeps everything but the side effects, the
	// tracker's reports and the session id, which no cached command has.
	r := &fsmpb.Result{}
	fillAll(r.ProtoReflect())
	clearUncached(r)
	c := cacheResult(9, r)
	if got := c.toProto(nil); !proto.Equal(got, r) {
		t.Errorf("cached result lost fields:\n got %v\nwant %v", got, r)
	}
	// The copy shares no message with the result it was made from.
	want := proto.Clone(r).(*fsmpb.Result)
	r.Acquire.Holder.Token++
	r.AcquireMany[0].Lock += "x"
	if got := c.toProto(nil); !proto.Equal(got, want) {
		t.Errorf("changing the result changed its cached copy: %v", got)
	}

	// Lock records: the owner label of holders and waiters is the
	// session's.
	s := newSession(7, "s", 7, 7)
	for _, p := range []*fsmpb.Lock{{}, {}} {
		fillAll(p.ProtoReflect())
		for _, h := range p.GetHolders() {
			h.SessionId, h.Owner = s.id, s.owner
			h.HoldLimitNanos = int64(time.Minute) // in range, whole milliseconds
			h.LockDelayNanos = int64(time.Second) // in range, whole seconds
			h.RevokeFrom, h.RevokeGraceNanos = 99, int64(30*time.Second)
		}
		for _, w := range p.GetWaiters() {
			// An exclusive waiter behind the shared holder: a shared one
			// would have been granted.
			w.SessionId, w.Owner, w.Shared = s.id, s.owner, false
			w.AcquireSeq++ // not the holder's acquire: each has its own value
			w.HoldLimitNanos = int64(time.Second)
			w.LockDelayNanos = int64(time.Minute)
		}
		p.DelayFrom, p.DelayNanos = 99, int64(15*time.Second) // an entry applied, a delay in range
		m := New()
		m.applied = 100
		m.sessions[s.id] = s
		if err := m.loadLock(p, 0, ""); err != nil {
			t.Fatal(err)
		}
		if got := m.locks[p.GetName()].toProto(); !proto.Equal(got, p) {
			t.Errorf("lock lost fields:\n got %v\nwant %v", got, p)
		}
		s.held, s.waits, s.keyWaits, s.holds = nil, nil, nil, 0
	}

	sp := &fsmpb.Session{}
	fillAll(sp.ProtoReflect())
	clearUncached(sp.Results[0].Result)
	sp.TtlNanos, sp.Id, sp.MinUnackedSeq, sp.Holds = int64(rules.DefaultTTL), 7, 7, 0
	m := New()
	m.applied = 100
	if err := m.loadSession(sp, 0); err != nil {
		t.Fatal(err)
	}
	got := &fsmpb.Session{}
	m.sessions[7].fill(got, nil, true)
	if !proto.Equal(got, sp) {
		t.Errorf("session lost fields:\n got %v\nwant %v", got, sp)
	}
}

// clearUncached clears the fields of r that the exactly-once cache never
// keeps (cacheResult).
func clearUncached(r *fsmpb.Result) {
	r.Grants, r.WaitsEnded, r.SessionsEnded, r.HoldsEnded, r.SessionId = nil, nil, nil, nil, 0
	r.Liveness = nil
	r.HoldsRevoked = nil
	// The holder an outcome names (BUSY, QUEUED) is for the acquirer,
	// without its revocation.
	for _, o := range append([]*fsmpb.AcquireOutcome{r.GetAcquire()}, r.GetAcquireMany()...) {
		if h := o.GetHolder(); h != nil {
			h.RevokeFrom, h.RevokeGraceNanos, h.RevokeDeadlineUnixNano = 0, 0, 0
		}
	}
}

// TestScratchMessagesForgetTheirLastRecord checks that the snapshot
// encoder's reused messages describe each record alone.
func TestScratchMessagesForgetTheirLastRecord(t *testing.T) {
	m, _ := fuzzMachine(t)
	var pa protoAlloc
	var p fsmpb.Lock
	m.locks["x"].fill(&p, &pa) // a holder and a waiter
	pa.reset()
	l := &lockState{name: "y", holders: []holder{{s: m.sessions[1], token: 2, count: 1}}}
	l.fill(&p, &pa)
	want := &fsmpb.Lock{Name: "y", Holders: []*fsmpb.Holder{{SessionId: 1, Owner: "a", Token: 2, Count: 1}}}
	if !proto.Equal(&p, want) {
		t.Errorf("reused lock message:\n got %v\nwant %v", &p, want)
	}
}
