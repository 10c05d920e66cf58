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
// Rows read at random hit in L2 with probability (L2 / 2) / table; every
// row comes from DRAM once at least. Counted by hand for fp32 rows of
// 1 KiB (c = 256):
//
//   - on an L40S (no L2 figure: every row read from DRAM): E = 4,096 into
//     r = 1,024: scatter 1 MiB zeroed + 4,096 x (8 + 1,024 + 2 x 1,024) =
//     13,664,256 B; gather 4,096 x (8 + 1,024) + 4 MiB written = 8,421,376;
//   - on an H100 (50 MiB of L2, 25 MiB per partition), the same 1 MiB
//     table fits: each row read once, 1 MiB in all: scatter 1 MiB + 4,096
//     x (8 + 1,024) + 2 x 1 MiB = 7,372,800 B; gather 4,096 x 8 + 1 MiB +
//     4 MiB = 5,275,648;
//   - on an H100, E = 262,144 rows into r = 65,536 (a 64 MiB table): a
//     read hits with probability 25/64, so 256 MiB of reads cost 256 x
//     39/64 = 156 MiB: scatter 64 MiB + 262,144 x 1,032 + 2 x 156 MiB =
//     712,507,392 B; gather 262,144 x 8 + 156 MiB + 256 MiB = 434,110,464.
func TestGraphOpsFromAccessPattern(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		gpu                  string
		e, r                 int64
		scatter, gatherBytes float64
	}{
		{"L40S", 4096, 1024, 13_664_256, 8_421_376},
		{"H100", 4096, 1024, 7_372_800, 5_275_648},
		{"H100", 262_144, 65_536, 64*mib + 262_144*1032 + 2*156*mib, 262_144*8 + 156*mib + 256*mib},
	} {
		const c = 256
		d, err := hw.LookupDevice(tc.gpu)
		if err != nil {
			t.Fatal(err)
		}
		pr := &pricer{d: d}
		pr.prog = &core.Program{Values: []core.ValueInfo{
			{Shape: []int64{tc.e, c}, Bytes: tc.e * c * 4, Grad: true},
			{Shape: []int64{tc.e}, Bytes: tc.e * 8},
			{Shape: []int64{tc.r, c}, Bytes: tc.r * c * 4},
		}}
		s := pr.scatter(&core.OpInfo{Kind: "scatter_add", In: []core.Value{0, 1}, Out: []core.Value{2}})
		if math.Abs(s.Bytes/tc.scatter-1) > 1e-12 {
			t.Errorf("%s, %d rows into %d: scatter-add moves %.0f B, want %.0f", tc.gpu, tc.e, tc.r, s.Bytes, tc.scatter)
		}
		g := pr.gather(&core.OpInfo{Kind: "index_select", In: []core.Value{2, 1}, Out: []core.Value{0}})
		if math.Abs(g.Bytes/tc.gatherBytes-1) > 1e-12 {
			t.Errorf("%s, %d rows from %d: gather moves %.0f B, want %.0f", tc.gpu, tc.e, tc.r, g.Bytes, tc.gatherBytes)
		}
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
		"stage.layers.1":                      "stage.layers.*",
		"mb1x.mb2.layers.2":                   "mb1x.mb2.layers.*",
		"rollout.member":                      "rollout.member",
		"stage٣.x":                            "stage٣.x",
	} {
		if got := foldPath(in); got != want {
			t.Errorf("foldPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// The Triton GraphTransformer's bytes (gt.py at b40b6c610), counted by hand
// on an H100 for r = 2 destination rows, s = 3 source rows, 4 edges, c = 8
// fp32 channels (32-byte rows) and 2 heads; the key and value tables (192
// B) fit in L2, so each of their rows is read from DRAM once:
//
//   - forward: q 64 + edge features 128 + key and value 192 + index 32 +
//     outputs (fp32 output 64, log-sum-exp 16, output 64) = 560 B;
//   - backward, destination pass: q, dQ, d_out 3 x 64 + output 64 +
//     log-sum-exp 16 + edge features 128 + key and value 192 + index 32 =
//     624 B; source pass: k, v, dK, dV 2 x 192 + q and d_out rows per edge
//     (their 128 B once) + edge features and their gradient 2 x 128 + two
//     indexes 64 + m and D 16 = 848 B; 1,472 B in all.
func TestGraphTransformerKernelBytes(t *testing.T) {
	d, _ := hw.LookupDevice("H100")
	pr := &pricer{d: d}
	v := func(shape []int64) core.ValueInfo {
		return core.ValueInfo{Shape: shape, Bytes: core.Numel(shape) * 4, Grad: true}
	}
	pr.prog = &core.Program{Values: []core.ValueInfo{
		v([]int64{2, 8}), v([]int64{3, 8}), v([]int64{3, 8}), v([]int64{4, 8}), // q, k, v, edge features
		{Shape: []int64{2, 4}, Bytes: 64},                    // edge index
		v([]int64{2, 8}), v([]int64{2, 2}), v([]int64{2, 8}), // fp32 output, log-sum-exp, output
	}}
	fwd, bwd, ok := pr.gtBytes(&core.OpInfo{Kind: "graph_attention", In: []core.Value{0, 1, 2, 3, 4}, Out: []core.Value{5, 6, 7}})
	if !ok || fwd != 560 || bwd != 1472 {
		t.Errorf("forward %g B, backward %g B (ok %v), want 560 and 1,472", fwd, bwd, ok)
	}
}
