package sim

import (
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// TestExplainLinearizability prints, for -sim.seed, every per-lock
// history porcupine finds illegal, in call order: the starting point for
// reading a linearizability failure.
func TestExplainLinearizability(t *testing.T) {
	if *flagSeed == 0 {
		t.Skip("set -sim.seed")
	}
	res := runSeed(t, *flagSeed)
	for i, p := range partition(res.history) {
		if porcupine.CheckOperationsTimeout(lockModel, p, 10*time.Second) != porcupine.Illegal {
			continue
		}
		slices.SortFunc(p, func(a, b porcupine.Operation) int { return int(a.Call - b.Call) })
		t.Logf("partition %d illegal, %d ops", i, len(p))
		for _, op := range p {
			t.Logf("c%d [%d,%d] %s", op.ClientId, op.Call, op.Return, lockModel.DescribeOperation(op.Input, op.Output))
		}
	}
}
