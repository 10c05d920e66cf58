package timing

import (
	"math"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
)

// price lowers plan p and prices its ops.
func price(t *testing.T, p *core.Plan) (*core.Program, []OpCost) {
	t.Helper()
	prog, err := p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	return prog, PriceOps(prog, p)
}

// opNamed is the cost of the op of the given kind and name.
func opNamed(t *testing.T, prog *core.Program, costs []OpCost, kind, name string) OpCost {
	t.Helper()
	for i := range prog.Ops {
		if prog.Ops[i].Kind == kind && prog.Ops[i].Name == name {
			return costs[i]
		}
	}
	t.Fatalf("no %s op %q", kind, name)
	return OpCost{}
}

// A linear layer's backward runs the input-gradient GEMM and the
// weight-gradient GEMM; under LoRA the frozen base runs only the first.
func TestMatmulBackwardFollowsTrainability(t *testing.T) {
	m := testmodels.Llama(1024, 2, 8, 8, 4096, 32000, "flash")
	full := testmodels.LlamaPlan(m, 1, 2048, "bf16", "none", "H100")
	prog, costs := price(t, full)
	c := opNamed(t, prog, costs, "matmul", "layers.1.mlp.up_proj")
	if c.BwdK != 2 {
		t.Errorf("trainable up_proj: %g backward GEMMs, want 2", c.BwdK)
	}
	lora := testmodels.LlamaPlan(m, 1, 2048, "bf16", "none", "H100")
	lora.LoRA = &core.LoRA{Rank: 8, Alpha: 16, Targets: []string{"q", "v"}}
	prog, costs = price(t, lora)
	f := opNamed(t, prog, costs, "matmul", "layers.1.mlp.up_proj")
	if f.BwdK != 1 || math.Abs(f.Bwd/f.Fwd-1) > 0.01 {
		t.Errorf("frozen up_proj: %g backward GEMMs taking %.2fx the forward, want 1 taking 1x", f.BwdK, f.Bwd/f.Fwd)
	}
	if math.Abs(c.Bwd/c.Fwd-2) > 0.02 {
		t.Errorf("trainable up_proj backward %.2fx the forward, want 2x (two GEMMs of its size)", c.Bwd/c.Fwd)
	}
}

// Fused and compiled dispatch run a chain of elementwise ops as one
// kernel that reads its inputs and writes what leaves it once: the
// previous block's residual add and Hugging Face's RMSNorm (seven ops
// under bf16 weights: casts, pow, mean, rsqrt, two muls) become one
// kernel that moves under half the bytes.
func TestFusionMergesElementwiseChains(t *testing.T) {
	m := testmodels.Llama(1024, 2, 8, 8, 4096, 32000, "flash")
	chain := func(d string) (ops int, k, bytes float64) {
		p := testmodels.LlamaPlan(m, 1, 2048, "bf16", "none", "H100")
		p.Overheads.Dispatch = d
		prog, costs := price(t, p)
		last := -1
		for i := range prog.Ops {
			if prog.Ops[i].Module == "layers.1.input_layernorm" {
				last = i
			}
		}
		for i := last; i >= 0 && pointwise(&prog.Ops[i]); i-- {
			ops++
			k += costs[i].FwdK
			bytes += costs[i].Bytes
		}
		return ops, k, bytes
	}
	n, ek, eb := chain("eager")
	_, fk, fb := chain("fused")
	if n < 7 || ek != float64(n) || math.Abs(fk-1) > 1e-9 || fb >= eb/2 {
		t.Errorf("residual add + RMSNorm (%d ops): eager %g kernels %.3g B, fused %g kernels %.3g B; want one kernel each eager, one in all fused moving under half", n, ek, eb, fk, fb)
	}
}

// Eager dispatch costs CPU per kernel; CUDA graphs none.
func TestDispatchCPU(t *testing.T) {
	m := testmodels.Llama(256, 2, 4, 4, 1024, 1000, "flash")
	for _, tc := range []struct {
		d       string
		perFwdK float64
	}{{"eager", eagerFwdCPU}, {"compiled", compiledCPU}, {"cuda_graphs", 0}} {
		p := testmodels.LlamaPlan(m, 1, 128, "bf16", "none", "H100")
		p.Overheads.Dispatch = tc.d
		_, costs := price(t, p)
		var k, cpu float64
		for _, c := range costs {
			k += c.FwdK
			cpu += c.FwdCPU
		}
		if math.Abs(cpu-k*tc.perFwdK) > 1e-12 {
			t.Errorf("%s: forward CPU %g s for %g kernels, want %g s each", tc.d, cpu, k, tc.perFwdK)
		}
	}
}

// A scatter-add of E rows of c channels into r rows: zero the output,
// then per row an index, the source row and an atomic read-modify-write
// of the output row; a gather reads an index and a row per output row.
func TestGraphOpsFromAccessPattern(t *testing.T) {
	const e, r, c = 4096, 1024, 256 // fp32 rows of 1 KiB
	d, _ := hw.LookupDevice("H100")
	pr := &pricer{d: d}
	pr.prog = &core.Program{Values: []core.ValueInfo{
		{Shape: []int64{e, c}, Bytes: e * c * 4, Grad: true},
		{Shape: []int64{e}, Bytes: e * 8},
		{Shape: []int64{r, c}, Bytes: r * c * 4},
	}}
	op := &core.OpInfo{Kind: "scatter_add", In: []core.Value{0, 1}, Out: []core.Value{2}}
	s := pr.scatter(op)
	if want := float64(r*c*4) + e*(8+3*c*4); math.Abs(s.Bytes/want-1) > 1e-12 {
		t.Errorf("scatter-add moves %g B, want %g", s.Bytes, want)
	}
	g := pr.gather(&core.OpInfo{Kind: "index_select", In: []core.Value{2, 1}, Out: []core.Value{0}})
	if want := e * (8 + 2*c*4.0); math.Abs(g.Bytes/want-1) > 1e-12 {
		t.Errorf("gather moves %g B, want %g", g.Bytes, want)
	}
	// 8-byte rows read whole 32-byte sectors
	if rowRead(8) != 32 || rowRead(1024) != 1024 || rowRead(1025) != 1056 {
		t.Errorf("sector rounding: %g %g %g", rowRead(8), rowRead(1024), rowRead(1025))
	}
}

func TestFoldPath(t *testing.T) {
	for in, want := range map[string]string{
		"layers.3.mlp.down_proj":              "layers.*.mlp.down_proj",
		"stage2.mb0.layers.17.self_attn":      "layers.*.self_attn",
		"member1.decoder.conv.chunk3":         "decoder.conv.chunk*",
		"rollout1.member0.processor.layers.4": "processor.layers.*",
		"":                                    "(model)",
		"mbx.layers.1":                        "mbx.layers.*",
		"loss":                                "loss",
		"stage1":                              "(model)",
		"stage1.mb2":                          "(model)",
		".a":                                  "(model)",
		"a..b.7":                              "a..b.*",
		"7":                                   "*",
		"chunk.x12.chunk12.12a":               "chunk.x12.chunk*.12a",
		"stage1.":                             "(model)",
		"layers.3.":                           "layers.*.",
	} {
		if got := foldPath(in); got != want {
			t.Errorf("foldPath(%q) = %q, want %q", in, got, want)
		}
	}
}
