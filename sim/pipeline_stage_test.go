package sim

import (
	"math"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
)

// EvaluateBelow replays a pipeline's stages from the one given and stops
// at the first that reaches the limit. Below it, its report must be
// Evaluate's, field for field, whichever stage goes first; at or above
// the fullest GPU's device memory it must return none; for every
// schedule, split, policy and precision, and with a paged optimizer;
// and a plan it does not stage
// (no pipeline, a checkpoint budget) is Evaluate's.
func TestEvaluateBelow(t *testing.T) {
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
			if li == 0 { // state in unified memory: outside the reserve, counted in DeviceUsed
				p.Optimizer = core.Optimizer{Kind: core.PagedAdamW}
			}
			n := p.Parallel.Norm()
			p.Cluster = hw.Cluster{Nodes: 1, GPUsPerNode: n.DP * n.TP * n.PP * n.CP}
			if err := p.Validate(); err != nil {
				continue
			}
			opts := core.Options{Timeline: true, Trace: true}
			if p.Optimizer.Paged() { // a GPU that holds half the paged state: the rest pages out
				first, err := Evaluate(p, core.Options{})
				if err != nil {
					t.Fatalf("%s %s: %v", ck, par, err)
				}
				p.Device.Memory = first.DeviceUsed - first.States.Optimizer/2
			}
			want, err := Evaluate(p, opts)
			if err != nil {
				t.Fatalf("%s %s: %v", ck, par, err)
			}
			if len(want.Ranks) != int(n.PP) {
				t.Fatalf("%s %s: %d ranks for pp %d", ck, par, len(want.Ranks), n.PP)
			}
			if p.Optimizer.Paged() && want.HostMemory == 0 {
				t.Errorf("%s %s: no paged state paged out", ck, par)
			}
			fullest := want.DeviceUsed
			for _, r := range want.Ranks {
				fullest = max(fullest, r.DeviceUsed)
			}
			for s, rr := range want.Ranks {
				workers := 1 + 2*(s%2) // the other stages one at a time, or on three goroutines
				got, err := EvaluateBelow(p, opts, fullest+1, int64(s), workers)
				if err != nil {
					t.Fatalf("%s %s from stage %d: %v", ck, par, s, err)
				}
				if d := difference(want, got, "report"); d != "" {
					t.Fatalf("%s %s from stage %d, %d workers: %s", ck, par, s, workers, d)
				}
				if got, err := EvaluateBelow(p, opts, rr.DeviceUsed, int64(s), workers); got != nil || err != nil {
					t.Errorf("%s %s: stage %d uses %d B, limit %d B: a report, %v", ck, par, s, rr.DeviceUsed, rr.DeviceUsed, err)
				}
				if got, err := EvaluateBelow(p, opts, fullest, int64(s), workers); got != nil || err != nil {
					t.Errorf("%s %s from stage %d: the fullest GPU uses the limit, %d B: a report, %v", ck, par, s, fullest, err)
				}
				stages++
			}
		}
	}
	if stages < 60 {
		t.Errorf("%d stages compared: the matrix lost its layouts", stages)
	}
	// Evaluated whole: a plan without a pipeline; and a plan Evaluate
	// refuses is refused with its error.
	p := testmodels.LlamaPlan(llama, 2, 64, "bf16-mixed", "none", "H100-80GB")
	want, werr := Evaluate(p, core.Options{})
	got, gerr := EvaluateBelow(p, core.Options{}, 1, 0, 2)
	if werr != nil || gerr != nil {
		t.Fatalf("no pipeline: %v, %v", werr, gerr)
	}
	if d := difference(want, got, "report"); d != "" {
		t.Errorf("no pipeline: %s", d)
	}
	bad := *p
	bad.Checkpoint = core.Checkpoint{Mode: "budget", Budget: core.Budget{Fraction: 0.5}}
	bad.Parallel = core.Parallelism{PP: 2}
	bad.Cluster = hw.Cluster{Nodes: 1, GPUsPerNode: 2}
	_, werr = Evaluate(&bad, core.Options{})
	_, gerr = EvaluateBelow(&bad, core.Options{}, math.MaxInt64, 0, 2)
	if werr == nil || !sameError(werr, gerr) {
		t.Errorf("a checkpoint budget on pipeline stages: Evaluate %v, EvaluateBelow %v", werr, gerr)
	}
}

// core.SplitRepeat is the repeat SplitStages splits, and fails where it
// fails, without listing the blocks: a model whose blocks sit in a
// sequential (and one repeat larger than another), one with two repeats
// side by side, one without a repeat, one of no blocks.
func TestSplitRepeatIsSplitStages(t *testing.T) {
	llama := testmodels.Llama(256, 6, 8, 4, 704, 1000, "flash")
	small := &core.Repeat{Name: "small", Layer: &nn.Norm{Name: "n", Dim: 256, RMS: true}, N: 2}
	big := &core.Repeat{Name: "big", Layer: &nn.Norm{Name: "n", Dim: 256, RMS: true}, N: 5}
	none := &core.Repeat{Name: "none", Layer: &nn.Norm{Name: "n", Dim: 256, RMS: true}, N: 0}
	models := map[string]*core.Model{
		"llama":        llama,
		"nested":       {Name: "nested", Layers: []core.Layer{small, &core.Sequential{Layers: []core.Layer{&core.Sequential{Layers: []core.Layer{big}}}}}},
		"side by side": {Name: "two", Layers: []core.Layer{big, small}},
		"no repeat":    {Name: "flat", Layers: []core.Layer{&nn.Norm{Name: "n", Dim: 256, RMS: true}}},
		"no blocks":    {Name: "empty", Layers: []core.Layer{none}},
	}
	for name, m := range models {
		s, serr := core.SplitStages(m, core.Parallelism{})
		r, rerr := core.SplitRepeat(m)
		if (serr == nil) != (rerr == nil) || (serr != nil && serr.Error() != rerr.Error()) {
			t.Errorf("%s: SplitStages says %v, SplitRepeat %v", name, serr, rerr)
			continue
		}
		if serr != nil {
			continue
		}
		if len(s.Blocks) != int(r.Count()) || (len(s.Blocks) > 0 && s.Blocks[0].Repeat() != r) {
			t.Errorf("%s: SplitStages splits %d blocks, SplitRepeat finds %q of %d", name, len(s.Blocks), r.Name, r.Count())
		}
	}
}
