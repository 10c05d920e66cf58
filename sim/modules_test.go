package sim

import (
	"math"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// r.modules adds up to the step time on every kind of plan: one GPU,
// checkpointed, LoRA, eval, FSDP, tensor and pipeline parallel, a graph
// model with ensemble members run one at a time.
func TestModulesSumToStepTime(t *testing.T) {
	m := testmodels.Llama(1024, 4, 8, 8, 4096, 32000, "flash")
	plans := map[string]*core.Plan{}
	add := func(name string, f func(p *core.Plan)) {
		p := testmodels.LlamaPlan(m, 2, 2048, "bf16-mixed", "none", "H100-80GB")
		f(p)
		plans[name] = p
	}
	add("one GPU", func(p *core.Plan) {})
	add("full checkpointing", func(p *core.Plan) { p.Checkpoint, _ = core.ParseCheckpoint("full") })
	add("LoRA", func(p *core.Plan) { p.LoRA = &core.LoRA{Rank: 8, Alpha: 16, Targets: []string{"q", "v"}} })
	add("eval", func(p *core.Plan) { p.Phase = core.Eval })
	add("FSDP x 8", func(p *core.Plan) { p.Parallel = core.Parallelism{DP: 8, FSDP: true} })
	add("TP 2 x PP 2 x DP 2", func(p *core.Plan) {
		p.Precision, _ = core.LookupPrecision("megatron")
		p.GradAccum = 4
		p.Parallel = core.Parallelism{DP: 2, TP: 2, PP: 2, SequenceParallel: true, DistributedOptimizer: true}
	})
	plans["Bris, 2 members one at a time"] = bris(t, 2, "sequential", 4, 1, "train")
	for name, p := range plans {
		r, err := Evaluate(p, core.Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkModules(t, name, r)
		for i, rank := range r.Ranks {
			checkModules(t, name+" rank "+string(rune('0'+i)), rank)
		}
	}
}

func checkModules(t *testing.T, name string, r *replay.Report) {
	t.Helper()
	var sum float64
	modules := 0
	for _, row := range r.Time.Modules {
		sum += row.Seconds
		if row.Count > 0 {
			modules++
			if got := row.Forward + row.Backward + row.Recompute + row.Launch; math.Abs(got-row.Seconds) > 1e-12*row.Seconds {
				t.Errorf("%s: %s: parts %g != seconds %g", name, row.Name, got, row.Seconds)
			}
		}
	}
	if modules == 0 || math.Abs(sum/r.Time.StepSeconds-1) > 1e-9 {
		t.Errorf("%s: %d module rows summing to %g s, step %g s", name, modules, sum, r.Time.StepSeconds)
	}
}

// The rows of a Llama-style block: layer indices fold, the repeated
// modules count their instances, and the GEMM-heavy MLP projections are
// compute-bound while the norms are memory-bound.
func TestModuleRowsFoldLayers(t *testing.T) {
	m := testmodels.Llama(4096, 4, 32, 8, 14336, 32000, "flash")
	plan := testmodels.LlamaPlan(m, 1, 4096, "bf16-mixed", "none", "H100-80GB")
	r, err := Evaluate(plan, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]replay.ModuleTime{}
	for _, row := range r.Time.Modules {
		rows[row.Name] = row
	}
	down, ok := rows["layers.*.mlp.down_proj"]
	if !ok || down.Count != 4 || down.Bound != "compute" {
		t.Fatalf("layers.*.mlp.down_proj: %+v", down)
	}
	// forward FLOPs: 2 x 4096 tokens x 14336 x 4096, four layers
	if want := 4 * 2 * 4096.0 * 14336 * 4096; math.Abs(down.FLOPs/want-1) > 1e-12 {
		t.Errorf("down_proj FLOPs %g, want %g", down.FLOPs, want)
	}
	// The row holds the GEMM and autocast's bf16 copy of the weight
	// (6 bytes an element, at the stream rate): its backward is two
	// GEMMs and one cast back (ToCopyBackward0), the cast's own bytes.
	d := plan.Device
	cast := 4 * 6 * 14336 * 4096 / (d.HBMGBps * 1e9 * d.Rates().HBM)
	if gemm := down.Forward - cast; math.Abs(down.Backward/(2*gemm+cast)-1) > 0.02 {
		t.Errorf("down_proj backward %.3f ms, want two GEMMs and a cast back: %.3f ms", 1e3*down.Backward, 1e3*(2*gemm+cast))
	}
	if n := rows["layers.*.input_layernorm"]; n.Count != 4 || n.Bound != "memory" {
		t.Errorf("layers.*.input_layernorm: %+v", n)
	}
	if _, ok := rows["optimizer"]; !ok {
		t.Errorf("no optimizer row: %v", r.Time.Modules)
	}
}
