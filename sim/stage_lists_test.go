package sim

import (
	"math"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// evaluateStagesAlone is Evaluate of a pipelined plan with every stage in
// lists of its own: no ProgramBuffers or NameTable shared over the
// stages, so each stage's program and names, its replay's state, its
// micro-batch program (the time model's) and the time model's lists are
// made afresh.
func evaluateStagesAlone(p *core.Plan) (*replay.Report, error) {
	r, err := newStagedRun(p, core.Options{}, 0, 1, false)
	if err != nil {
		return nil, err
	}
	defer r.stop()
	for _, s := range r.order {
		r.stage(s, math.MaxInt64, nil)
	}
	return r.report()
}

// Evaluate replays a pipeline's stages one after another in one
// ProgramBuffers (evaluateStages), the time model's micro-batch programs
// and lists in its Aside, the copied blocks' names in one NameTable: the
// report is the one of stages replayed in lists of their own, without a
// table, field for field, over schedules, checkpointing, precisions,
// sharding and MoE.
func TestStagesInSharedListsEqualStagesAlone(t *testing.T) {
	llama := testmodels.Llama(256, 8, 8, 4, 704, 1000, "flash")
	var plans []*core.Plan
	for _, tc := range []struct {
		m    *core.Model
		prec string
		ckpt string
		par  core.Parallelism
	}{
		{llama, "megatron", "none", core.Parallelism{PP: 4}},
		{llama, "megatron", "full", core.Parallelism{PP: 2, TP: 2, SequenceParallel: true, DistributedOptimizer: true, DP: 2}},
		{llama, "megatron", "selective", core.Parallelism{PP: 2, Schedule: "interleaved", VirtualStages: 2}},
		{llama, "megatron", "full", core.Parallelism{PP: 2, Schedule: "zb-h1"}},
		{llama, "megatron", "none", core.Parallelism{PP: 2, Schedule: "zb-v", VirtualStages: 2}},
		{llama, "megatron", "none", core.Parallelism{PP: 2, Schedule: "dualpipe"}},
		{llama, "megatron", "full", core.Parallelism{PP: 2, EmbeddingSlot: true, LossSlot: true}},
		{llama, "bf16-mixed", "none", core.Parallelism{PP: 2, DP: 2}},
		{moeStack(), "megatron", "none", core.Parallelism{PP: 2, EP: 2, DP: 2}},
	} {
		p := testmodels.LlamaPlan(tc.m, 2, 64, tc.prec, tc.ckpt, "H100-80GB")
		p.Parallel, p.GradAccum = tc.par, 8
		plans = append(plans, p)
	}
	for i, p := range plans {
		want, err := evaluateStagesAlone(p)
		if err != nil {
			t.Fatalf("plan %d (%s): %v", i, p.Parallel, err)
		}
		if want.Time.StepSeconds <= 0 || len(want.Ranks) < 2 || len(want.Ranks[0].Time.Modules) == 0 {
			t.Fatalf("plan %d (%s): no pipeline step to compare: %+v", i, p.Parallel, want.Time)
		}
		got, err := Evaluate(p, core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, cmp.Exporter(func(reflect.Type) bool { return true })); diff != "" { // unexported fields too
			t.Errorf("plan %d (%s): the report of stages in shared lists differs (-alone +shared):\n%s", i, p.Parallel, diff)
		}
	}
}
