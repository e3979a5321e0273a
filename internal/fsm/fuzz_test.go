package fsm

import (
	"encoding/binary"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// FuzzApply decodes the input as a series of commands (each a 2-byte
// big-endian length, then a marshalled fsmpb.Command) and applies them to
// a machine that already has two sessions, a held lock and a waiter.
// Whatever the bytes, Apply must not panic, and every invariant must hold
// after every entry.
func FuzzApply(f *testing.F) {
	for _, cmds := range fuzzSeeds() {
		f.Add(encodeCommands(f, cmds...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, index := fuzzMachine(t)
		for len(data) >= 2 {
			n := int(binary.BigEndian.Uint16(data))
			data = data[2:]
			if n > len(data) {
				n = len(data)
			}
			var cmd fsmpb.Command
			if err := proto.Unmarshal(data[:n], &cmd); err != nil {
				data = data[n:]
				continue
			}
			data = data[n:]
			index++
			m.Apply(index, &cmd)
			if err := checkInvariants(m); err != nil {
				t.Fatalf("after %v: %v", &cmd, err)
			}
		}
	})
}

// fuzzMachine returns a machine with sessions 1 and 2, lock "x" held by 1
// (token 3) and session 2 waiting for it with acquire seq 1; and the last
// index used.
func fuzzMachine(t testing.TB) (*Machine, uint64) {
	m := New()
	for i, cmd := range []*fsmpb.Command{
		{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{Owner: "a"}}},
		{Op: &fsmpb.Command_OpenSession{OpenSession: &fsmpb.OpenSession{Owner: "b"}}},
		{SessionId: 1, Seq: 1, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: "x"}}},
		{SessionId: 2, Seq: 1, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: "x", Wait: true}}},
	} {
		if err := ErrorOf(m.Apply(uint64(i+1), cmd)); err != nil {
			t.Fatal(err)
		}
	}
	return m, m.AppliedIndex()
}

func fuzzSeeds() [][]*fsmpb.Command {
	return [][]*fsmpb.Command{
		{
			{SessionId: 1, Seq: 2, Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: "x", Token: 3}}},
			{SessionId: 2, Seq: 2, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: "x", Wait: true}}},
		},
		{
			{Op: &fsmpb.Command_ExpireSession{ExpireSession: &fsmpb.ExpireSession{SessionId: 1}}},
			{SessionId: 2, Seq: 1, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: "x", Wait: true}}},
		},
		{
			{Op: &fsmpb.Command_CancelWait{CancelWait: &fsmpb.CancelWait{Lock: "x", SessionId: 2, AcquireSeq: 1, TimedOut: true}}},
			{Op: &fsmpb.Command_CasRelease{CasRelease: &fsmpb.CasRelease{Lock: "x", SessionId: 1}}},
		},
		{
			// The grant wins the race with a caller's cleanup; then a
			// retry and a duplicate cleanup.
			{SessionId: 1, Seq: 2, Op: &fsmpb.Command_Release{Release: &fsmpb.Release{Lock: "x", Token: 3}}},
			{Op: &fsmpb.Command_CancelWait{CancelWait: &fsmpb.CancelWait{Lock: "x", SessionId: 2, AcquireSeq: 1, Abandoned: true}}},
			{SessionId: 2, Seq: 1, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: "x", Wait: true}}},
			{Op: &fsmpb.Command_CancelWait{CancelWait: &fsmpb.CancelWait{Lock: "x", SessionId: 2, AcquireSeq: 1, Abandoned: true}}},
		},
		{
			// A hold with a lock-delay expires: the lock is in its delay,
			// then the leader ends it (and a stale end).
			{SessionId: 2, Seq: 2, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: "d", LockDelayNanos: 5e9}}},
			{SessionId: 1, Seq: 2, Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Lock: "d", Wait: true}}},
			{Op: &fsmpb.Command_ExpireSession{ExpireSession: &fsmpb.ExpireSession{SessionId: 2}}},
			{Op: &fsmpb.Command_EndLockDelay{EndLockDelay: &fsmpb.EndLockDelay{Lock: "d", DelayFrom: 7}}},
			{Op: &fsmpb.Command_EndLockDelay{EndLockDelay: &fsmpb.EndLockDelay{Lock: "d", DelayFrom: 7}}},
		},
		{
			{Op: &fsmpb.Command_BlacklistSession{BlacklistSession: &fsmpb.BlacklistSession{SessionId: 2}}},
			{SessionId: 1, Seq: 5, MinUnackedSeq: 3, Op: &fsmpb.Command_AcquireMany{AcquireMany: &fsmpb.AcquireMany{Locks: []string{"x", "y"}}}},
			{SessionId: 1, Seq: 6, Op: &fsmpb.Command_CloseSession{CloseSession: &fsmpb.CloseSession{}}},
		},
	}
}

func encodeCommands(tb testing.TB, cmds ...*fsmpb.Command) []byte {
	var out []byte
	for _, c := range cmds {
		b, err := proto.Marshal(c)
		if err != nil {
			tb.Fatal(err)
		}
		out = binary.BigEndian.AppendUint16(out, uint16(len(b)))
		out = append(out, b...)
	}
	return out
}
