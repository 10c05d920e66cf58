package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// TestFloat8SkipsUnalignedLinears: torchtitan's module_filter_fn
// (components/quantization/utils.py at b5bcd76) converts only linears
// whose in and out features are multiples of 16 and leaves the others in
// high precision, so a plan with such a linear runs, with a note naming
// it. fc1 (16 -> 32) converts (its forward casts to fp8); fc2 (32 -> 100)
// and fc3 (100 -> 16) do not: their ops are the plain linear's, and the
// plan with only unaligned linears holds what it holds without float8.
func TestFloat8SkipsUnalignedLinears(t *testing.T) {
	build := func(f8 bool, layers ...core.Layer) *core.Plan {
		m := &core.Model{Name: "tiny", Layers: append([]core.Layer{&nn.Embedding{Name: "embed", Rows: 100, Dim: 16}}, layers...), Vocab: 100}
		p := testmodels.LlamaPlan(m, 2, 64, "bf16", "none", "H100-80GB")
		if f8 {
			p.Float8 = core.Float8{Scaling: "tensorwise"}
		}
		return p
	}
	mixed := build(true, &nn.Linear{Name: "fc1", In: 16, Out: 32}, &nn.Linear{Name: "fc2", In: 32, Out: 100}, &nn.Linear{Name: "fc3", In: 100, Out: 16})
	prog := lower(t, mixed)
	if want := []string{"fc2 (32 -> 100)", "fc3 (100 -> 16)"}; strings.Join(prog.Float8Skipped, "|") != strings.Join(want, "|") {
		t.Errorf("skipped %q, want %q", prog.Float8Skipped, want)
	}
	casts := map[string]bool{}
	for _, op := range prog.Ops {
		if strings.Contains(op.Name, "fp8") || strings.Contains(op.Name, "amax") {
			casts[strings.SplitN(op.Name, ".", 2)[0]] = true
		}
	}
	if !casts["fc1"] || casts["fc2"] || casts["fc3"] {
		t.Errorf("float8 casts in %v, want fc1 only", casts)
	}
	rep := evalPlan(t, mixed)
	if !strings.Contains(strings.Join(rep.Notes, "\n"), "float8: linears with a dimension not divisible by 16 stay in high precision") {
		t.Errorf("no note of the skipped linears: %q", rep.Notes)
	}
	unaligned := []core.Layer{&nn.Linear{Name: "fc2", In: 16, Out: 100}, &nn.Linear{Name: "fc3", In: 100, Out: 16}}
	if a, b := evalPlan(t, build(true, unaligned...)).PeakAllocated, evalPlan(t, build(false, unaligned...)).PeakAllocated; a != b {
		t.Errorf("only unaligned linears: %d bytes with float8, %d without; want the same", a, b)
	}
}

// TestFloat8AutoFilter: torchao's _auto_filter_for_recipe
// (float8_linear_utils.py at 36027d8) on one Llama 3 8B layer (hidden
// 4,096, 8 KV heads of 128: k and v are 4096 -> 1024; MLP 14,336).
// Tensorwise leaves K <= 4096 and N <= 1024 in bf16: k_proj and v_proj.
// Rowwise leaves N <= 2048, K <= 1024, or N <= 4096 and K <= 2048: k_proj
// and v_proj again (N = 1024); q, o, gate, up and down convert under
// both. Without the filter all seven convert.
func TestFloat8AutoFilter(t *testing.T) {
	for _, tc := range []struct {
		scaling string
		auto    bool
		want    string
	}{
		{"tensorwise", false, "down_proj gate_proj k_proj o_proj q_proj up_proj v_proj"},
		{"tensorwise", true, "down_proj gate_proj o_proj q_proj up_proj"},
		{"rowwise", true, "down_proj gate_proj o_proj q_proj up_proj"},
	} {
		m := testmodels.Llama(4096, 1, 32, 8, 14336, 128, "sdpa")
		p := testmodels.LlamaPlan(m, 1, 64, "bf16", "none", "H100-80GB")
		p.Float8 = core.Float8{Scaling: tc.scaling, AutoFilter: tc.auto}
		prog := lower(t, p)
		converted := map[string]bool{}
		for _, op := range prog.Ops {
			if !strings.Contains(op.Name, "fp8") {
				continue
			}
			for _, part := range strings.Split(op.Name, ".") {
				if strings.HasSuffix(part, "_proj") {
					converted[part] = true
				}
			}
		}
		var got []string
		for k := range converted {
			got = append(got, k)
		}
		slices.Sort(got)
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s, auto filter %v: converted %q, want %q", tc.scaling, tc.auto, strings.Join(got, " "), tc.want)
		}
		if len(prog.Float8Skipped) != 0 {
			t.Errorf("%s: the size filter noted %q; the plan asked for it", tc.scaling, prog.Float8Skipped)
		}
	}
}
