package sim

import (
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
)

// StageDeviceUsed replays one stage alone; its device memory must be the
// one Evaluate reports for that stage among the others, for every
// schedule, split, policy and precision, and it must decline the plans
// whose stages Evaluate replays another way.
func TestStageDeviceUsed(t *testing.T) {
	llama := testmodels.Llama(256, 6, 8, 4, 704, 1000, "flash")
	policies := []core.Checkpoint{{Mode: "none"}, {Mode: "full", Every: 1}, {Mode: "selective", Selective: true},
		{Mode: "op", Save: core.DefaultSaveOps()}}
	layouts := []core.Parallelism{{PP: 2, DP: 2}, {PP: 3}, {PP: 2, Schedule: "interleaved", VirtualStages: 3},
		{PP: 4, EmbeddingSlot: true, LossSlot: true}, {PP: 3, PPRuntime: "torch"},
		{PP: 2, TP: 2, SequenceParallel: true, DistributedOptimizer: true, DP: 2}, {PP: 3, StageSplit: "torchtitan"},
		{PP: 4, Schedule: "zb-h1"}}
	precs := []string{"bf16-mixed", "fp32", "megatron"}
	stages := 0
	for ci, ck := range policies {
		for li, par := range layouts {
			prec := precs[(ci+li)%len(precs)]
			p := testmodels.LlamaPlan(llama, 2, 64, prec, "none", "H100-80GB")
			p.Checkpoint, p.Parallel, p.GradAccum = ck, par, 4
			n := p.Parallel.Norm()
			p.Cluster = hw.Cluster{Nodes: 1, GPUsPerNode: n.DP * n.TP * n.PP * n.CP}
			if err := p.Validate(); err != nil {
				continue
			}
			rep, err := Evaluate(p, core.Options{})
			if err != nil {
				t.Fatalf("%s %s: %v", ck, par, err)
			}
			if len(rep.Ranks) != int(n.PP) {
				t.Fatalf("%s %s: %d ranks for pp %d", ck, par, len(rep.Ranks), n.PP)
			}
			for s, rr := range rep.Ranks {
				used, ok, err := StageDeviceUsed(p, int64(s), core.Options{})
				if err != nil || !ok {
					t.Fatalf("%s %s stage %d: ok %v, %v", ck, par, s, ok, err)
				}
				if used != rr.DeviceUsed {
					t.Errorf("%s %s stage %d: alone %d B, among the stages %d B", ck, par, s, used, rr.DeviceUsed)
				}
				stages++
			}
		}
	}
	if stages < 60 {
		t.Errorf("%d stages compared: the matrix lost its layouts", stages)
	}
	// Declined: no pipeline, a stage out of range, a checkpoint budget to
	// solve first.
	p := testmodels.LlamaPlan(llama, 2, 64, "bf16-mixed", "none", "H100-80GB")
	if _, ok, err := StageDeviceUsed(p, 0, core.Options{}); ok || err != nil {
		t.Errorf("no pipeline: ok %v, %v", ok, err)
	}
	p.Parallel = core.Parallelism{PP: 2}
	p.Cluster = hw.Cluster{Nodes: 1, GPUsPerNode: 2}
	if _, ok, err := StageDeviceUsed(p, 2, core.Options{}); ok || err != nil {
		t.Errorf("stage 2 of 2: ok %v, %v", ok, err)
	}
	p.Checkpoint = core.Checkpoint{Mode: "budget", Budget: core.Budget{Fraction: 0.5}}
	if _, ok, err := StageDeviceUsed(p, 0, core.Options{}); ok || err != nil {
		t.Errorf("checkpoint budget: ok %v, %v", ok, err)
	}
}
