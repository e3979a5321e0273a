package sim

import (
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// linOp is one step of a sequential history for the model.
type linOp struct {
	in linInput
	o  outcome
}

// linearizable runs the model on ops, one after another.
func linearizable(ops ...linOp) bool {
	var hist []porcupine.Operation
	for i, op := range ops {
		hist = append(hist, porcupine.Operation{ClientId: int(op.in.session), Input: op.in, Output: op.o, Call: int64(2 * i), Return: int64(2*i + 1)})
	}
	return porcupine.CheckOperations(lockModel, hist)
}

// TestModelKeys: with several owner keys per session (Config.Keys), the
// model's owner is (session, key): the session under another key is
// another owner (BUSY, no grant beside a mutex's hold, a permit apiece),
// reentrant counts are per owner, and a release, expiry or proclaim
// names the owner's hold.
func TestModelKeys(t *testing.T) {
	acq := func(s uint64, key, lock string) linInput {
		return linInput{kind: opAcquireTry, session: s, key: key, lock: lock, shared: isSemaphore(lock)}
	}
	rel := func(s uint64, key, lock string, token uint64) linInput {
		return linInput{kind: opRelease, session: s, key: key, lock: lock, token: token}
	}
	wait := func(s uint64, key, lock string) linInput {
		in := acq(s, key, lock)
		in.kind = opAcquireWait
		return in
	}
	deadlock := outcome{code: fsmpb.Error_ERROR_DEADLOCK}
	unknownWait := wait
	abandon := func(s uint64, key, lock string) linInput {
		return linInput{kind: opAbandon, session: s, key: key, lock: lock}
	}
	granted := func(token uint64, count uint32) outcome { return outcome{granted: true, token: token, count: count} }
	busy := outcome{busy: true}
	ok := func(remaining uint32) outcome { return outcome{remaining: remaining} }
	notHolder := outcome{code: fsmpb.Error_ERROR_NOT_HOLDER}
	const m, sem = "lock/0", "sem/0"
	for _, c := range []struct {
		name  string
		legal bool
		ops   []linOp
	}{
		{"a mutex granted to the session's other key while it holds it", false, []linOp{
			{acq(1, "", m), granted(5, 1)}, {acq(1, "k2", m), granted(6, 1)}}},
		{"a mutex re-entered by the session's other key", false, []linOp{
			{acq(1, "", m), granted(5, 1)}, {acq(1, "k2", m), granted(5, 2)}}},
		{"BUSY for the session's other key", true, []linOp{
			{acq(1, "", m), granted(5, 1)}, {acq(1, "k2", m), busy}, {rel(1, "", m, 5), ok(0)}, {acq(1, "k2", m), granted(8, 1)}}},
		{"BUSY for the holding key", false, []linOp{
			{acq(1, "", m), granted(5, 1)}, {acq(1, "", m), busy}}},
		{"counts per key", true, []linOp{
			{acq(1, "k2", m), granted(5, 1)}, {acq(1, "k2", m), granted(5, 2)}, {rel(1, "k2", m, 5), ok(1)}, {rel(1, "k2", m, 5), ok(0)}}},
		{"a release by the other key of the session's hold", false, []linOp{
			{acq(1, "", m), granted(5, 1)}, {rel(1, "k2", m, 5), ok(0)}}},
		{"the other key refused the session's hold", true, []linOp{
			{acq(1, "", m), granted(5, 1)}, {rel(1, "k2", m, 5), notHolder}, {acq(2, "", m), busy}}},
		{"an expiry of the other key's hold", false, []linOp{
			{acq(1, "", m), granted(5, 1)}, {linInput{kind: opExpireHold, session: 1, key: "k2", lock: m, token: 5}, outcome{}}}},
		{"a proclaim by the other key", false, []linOp{
			{acq(1, "", m), granted(5, 1)}, {linInput{kind: opProclaim, session: 1, key: "k2", lock: m, token: 5, value: "v"}, outcome{}}}},
		{"a permit apiece for two keys of a session", true, []linOp{
			{acq(1, "", sem), granted(5, 1)}, {acq(1, "k2", sem), granted(6, 1)}, {acq(2, "", sem), busy}}},
		{"a second permit for one key", false, []linOp{
			{acq(1, "", sem), granted(5, 1)}, {acq(1, "", sem), granted(6, 1)}}},
		{"two keys' permits of one entry end apiece", true, []linOp{
			{acq(1, "", sem), granted(5, 1)}, {acq(1, "k2", sem), granted(5, 1)}, {rel(1, "k2", sem, 5), ok(0)},
			{rel(1, "k2", sem, 5), notHolder}, {rel(1, "", sem, 5), ok(0)}}},
		{"a permit released twice through the other key", false, []linOp{
			{acq(1, "", sem), granted(5, 1)}, {acq(1, "k2", sem), granted(5, 1)}, {rel(1, "k2", sem, 5), ok(0)}, {rel(1, "k2", sem, 5), ok(0)}}},
		{"a wait ended as deadlocked behind its own key's hold", true, []linOp{
			{acq(1, "k2", m), granted(5, 1)}, {wait(1, "k2", m), deadlock}}},
		{"a try refused as a deadlock while its own key holds", false, []linOp{
			{acq(1, "k2", m), granted(5, 1)}, {acq(1, "k2", m), deadlock}}},
		{"a wait ended as deadlocked for a free lock", false, []linOp{
			{acq(1, "k2", m), granted(5, 1)}, {rel(1, "k2", m, 5), ok(0)}, {wait(1, "", m), deadlock}}},
		{"an abandon releases the count of a wait never told, re-entered by a try", true, []linOp{
			{unknownWait(1, "", m), outcome{unknown: true}}, {acq(1, "", m), granted(61, 2)}, {abandon(1, "", m), outcome{granted: true, token: 61, remaining: 1}},
			{rel(1, "", m, 61), ok(0)}}},
		{"an abandon releases a count of a wait told, re-entered by a try", false, []linOp{
			{wait(1, "", m), granted(61, 0)}, {acq(1, "", m), granted(61, 2)}, {abandon(1, "", m), outcome{granted: true, token: 61, remaining: 1}}}},
		{"an abandon releases two counts of one wait never told", false, []linOp{
			{unknownWait(1, "", m), outcome{unknown: true}}, {acq(1, "", m), granted(61, 2)}, {abandon(1, "", m), outcome{granted: true, token: 61, remaining: 1}},
			{abandon(1, "", m), outcome{granted: true, token: 61, remaining: 0}}}},
		{"a session's end ends both keys' holds", true, []linOp{
			{acq(1, "", sem), granted(5, 1)}, {acq(1, "k2", sem), granted(6, 1)},
			{linInput{kind: opExpire, session: 1}, outcome{}}, {acq(2, "", sem), granted(9, 1)}, {acq(3, "", sem), granted(10, 1)}}},
	} {
		ops := c.ops
		for i := range ops {
			if ops[i].in.kind == opExpire {
				ops[i].in.lock = ops[0].in.lock // as partition names it
			}
		}
		if got := linearizable(ops...); got != c.legal {
			t.Errorf("%s: linearizable %v, want %v", c.name, got, c.legal)
		}
	}
}
