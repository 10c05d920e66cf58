package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/hw"
)

// DeepSeek-V3 as its report trains it (arXiv:2412.19437, section 3.2):
// 16-way pipeline, 64-way expert parallelism, ZeRO-1 data parallelism
// (Megatron's distributed optimizer), here on 2,048 H100s with 4 layers a
// stage and one on the last (with the MTP module, the output layer and
// the loss). Every stage is replayed: each fits, the first holds the
// embedding and the last the head and the MTP module, so both hold more
// than a middle stage.
func TestDeepSeekV3On3DAndEP(t *testing.T) {
	m, err := hf.FromConfigOptions(readHF(t, "deepseek-v3.json"), hf.Options{Attn: "flash", MTP: true})
	if err != nil {
		t.Fatal(err)
	}
	dev, _ := hw.LookupDevice("H100-80GB")
	prec, _ := core.LookupPrecision("megatron")
	rt, _ := core.LookupRuntime("cuda")
	ck, _ := core.ParseCheckpoint("full")
	layers := make([]int64, 16)
	for i := range layers {
		layers[i] = 4
	}
	layers[15] = 1
	p := &core.Plan{Model: m, Batch: 1, Seq: 4096, GradAccum: 16, Members: 1, Precision: prec, Runtime: rt,
		Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: ck, Device: dev, Phase: core.Train,
		Parallel: core.Parallelism{DP: 128, PP: 16, EP: 64, DistributedOptimizer: true, StageLayers: layers}}
	r := evalPlan(t, p)
	if len(r.Ranks) != 16 {
		t.Fatalf("%d stages replayed, want 16", len(r.Ranks))
	}
	for i, s := range r.Ranks {
		if !s.Fits {
			t.Errorf("stage %d does not fit: %d bytes allocated", i, s.PeakAllocated)
		}
	}
	if first, mid, last := r.Ranks[0].PeakAllocated, r.Ranks[7].PeakAllocated, r.Ranks[15].PeakAllocated; first <= mid || last <= mid {
		t.Errorf("peaks: first stage %d, middle %d, last %d bytes: the ends should hold more", first, mid, last)
	}
}
