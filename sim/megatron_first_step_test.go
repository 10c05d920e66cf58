package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// TestMegatronFirstStep follows a Megatron step's trace (replay/
// lazy_states.go, shard_megatron.go): the model's own parameter tensors
// go once DDP has its buffers and before the optimizer makes its main
// shards; Adam's moments are made by the first step's optimizer.step(),
// after its forward and backward, and a second, steady step follows
// with them in place. The moments and main shards are one tensor per
// parameter shard, and the steady step's states are the same bytes as
// the distributed optimizer's (6 + 12/dp per parameter).
func TestMegatronFirstStep(t *testing.T) {
	m := linearStack(2, 1024, 4096)
	psi := m.Params()
	p := distPlan(t, m, "megatron", core.Parallelism{DP: 2, DistributedOptimizer: true})
	p.Seq = 2048
	rep, err := Evaluate(p, core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.States
	if got := s.Params + s.Grads + s.Master + s.Optimizer; got != 6*psi+12*psi/2 {
		t.Errorf("%d bytes of states, want 6Ψ + 12Ψ/dp = %d", got, 6*psi+12*psi/2)
	}
	ev := rep.Trace.Events
	index := func(what string, ok func(e replay.TraceEvent) bool) int {
		for i, e := range ev {
			if ok(e) {
				return i
			}
		}
		t.Fatalf("no %s in the trace", what)
		return -1
	}
	isAlloc := func(e replay.TraceEvent) bool { return e.Action == "alloc" }
	lastModelFree, mainShards, moments := -1, 0, 0
	for i, e := range ev {
		if e.Action == "free_completed" && e.Phase == replay.PhaseSetup && strings.HasSuffix(e.Tensor, ".weight") {
			lastModelFree = i
		}
		if isAlloc(e) && strings.HasSuffix(e.Tensor, " main param") {
			mainShards++
		}
		if isAlloc(e) && strings.HasSuffix(e.Tensor, " exp_avg") {
			moments++
		}
	}
	firstMain := index("main shard", func(e replay.TraceEvent) bool { return isAlloc(e) && strings.HasSuffix(e.Tensor, " main param") })
	firstMoment := index("moment", func(e replay.TraceEvent) bool { return isAlloc(e) && strings.HasSuffix(e.Tensor, " exp_avg") })
	firstForward := index("forward", func(e replay.TraceEvent) bool { return isAlloc(e) && e.Phase == replay.PhaseForward })
	if lastModelFree < 0 || lastModelFree > firstMain {
		t.Errorf("the model's parameter tensors are freed at event %d, the first main shard is made at %d", lastModelFree, firstMain)
	}
	if ev[firstMoment].Phase != replay.PhaseOptimizer || firstMoment < firstForward {
		t.Errorf("the first moment is made at event %d (%s), the first forward allocation at %d", firstMoment, ev[firstMoment].Phase, firstForward)
	}
	second := -1
	for i := firstMoment; i < len(ev); i++ {
		if isAlloc(ev[i]) && ev[i].Phase == replay.PhaseForward {
			second = i
			break
		}
	}
	if second < 0 {
		t.Error("no steady step after the first step's optimizer.step()")
	}
	// rank 0's half of the buffer: the last two of the four linears, one
	// main shard and one exp_avg each.
	if mainShards != 2 || moments != 2 {
		t.Errorf("%d main shards and %d exp_avg tensors, want 2 and 2", mainShards, moments)
	}
}
