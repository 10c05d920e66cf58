package sim

import (
	"math"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// spreadPlan is moeStack's two MoE blocks as Megatron's grouped experts
// (precision "megatron", the distributed optimizer: a first step replayed
// before the steady one) at ep 2, 1024 tokens a rank: each layer's
// experts receive 2048 routed rows of 512 bf16 values (2 MiB) at the
// balanced share.
func spreadPlan(t *testing.T, spread float64) *core.Plan {
	t.Helper()
	m := moeStack()
	m.Layers[0].(*core.Repeat).Layer.(*nn.MoE).Impl = nn.MoEGrouped
	p := distPlan(t, m, "megatron", core.Parallelism{DP: 2, EP: 2, DistributedOptimizer: true, ExpertSpread: spread})
	p.Seq = 1024
	return p
}

// TestExpertSpreadDrawsRoutedRows: with expert_spread=0.25 every tensor
// whose rows are a layer's received rows (the dispatch all-to-all's
// output through the combine's input, and their gradients) is allocated
// at its lowered bytes times one factor of [0.75, 1.25] per layer and
// step: the same for all of them and for the backward's gradients, and
// another for the other layer and the other step. Every other tensor,
// and the step time, stay as at expert_spread=0, whose replay allocates
// the lowered bytes throughout.
func TestExpertSpreadDrawsRoutedRows(t *testing.T) {
	const s = 0.25
	base := spreadPlan(t, 0)
	prog, err := base.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	lowered, routed := map[string]int64{}, map[string]bool{}
	for _, v := range prog.Values {
		if _, twice := lowered[v.Name]; twice { // a name two values share says nothing of either
			lowered[v.Name] = -1
			continue
		}
		lowered[v.Name], routed[v.Name] = v.Bytes, v.Routed > 0
	}
	for _, q := range prog.Params { // a parameter's gradient is traced under its name
		lowered[q.Name] = -1
	}
	for _, spread := range []float64{0, s} {
		r, err := Evaluate(spreadPlan(t, spread), core.Options{Trace: true})
		if err != nil {
			t.Fatal(err)
		}
		type key struct {
			layer string
			step  int
		}
		factors := map[key]float64{}
		n := 0
		for i, e := range r.Trace.Events {
			name := strings.TrimPrefix(e.Tensor, "grad of ")
			want, ok := lowered[name]
			if e.Action != "alloc" || !ok || want < 1<<20 { // the routed tensors here are 1-4 MiB
				continue
			}
			f := float64(e.Size) / float64(want)
			if !routed[name] || spread == 0 {
				if e.Size != want {
					t.Errorf("spread %g: %s allocated %d bytes, lowered %d", spread, e.Tensor, e.Size, want)
				}
				continue
			}
			n++
			k := key{name[:strings.Index(name, ".moe")], 0}
			if i >= r.Trace.Steady {
				k.step = 1
			}
			if f < 1-s || f > 1+s {
				t.Errorf("%s: %d bytes, %.3f x its lowered %d, outside [%g, %g]", e.Tensor, e.Size, f, want, 1-s, 1+s)
			}
			if g, seen := factors[k]; seen && math.Abs(g-f) > 1e-6 {
				t.Errorf("%s (step %d): %.6f x its lowered bytes, %.6f for the layer's others", e.Tensor, k.step, f, g)
			}
			factors[k] = f
		}
		if spread == 0 {
			continue
		}
		t.Logf("%d routed allocations; factors by layer and step: %v", n, factors)
		if len(factors) != 4 {
			t.Fatalf("%d layer-steps with routed tensors, want 2 layers x 2 steps", len(factors))
		}
		seen := map[float64]bool{}
		for _, f := range factors {
			seen[f] = true
		}
		if len(seen) != 4 {
			t.Errorf("factors %v repeat across layers or steps", factors)
		}
	}
	a, b := evalPlan(t, spreadPlan(t, 0)), evalPlan(t, spreadPlan(t, s))
	if a.Time.StepSeconds != b.Time.StepSeconds {
		t.Errorf("step %.6f s at expert_spread=0, %.6f s at %g: the time model prices the lowered rows", a.Time.StepSeconds, b.Time.StepSeconds, s)
	}
}
