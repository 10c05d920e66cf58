package sim

import (
	"math"
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/timing"
	"github.com/memsh/memsh/sim/units"
)

// tePlan is a tiny Megatron GPT: one Llama block (dim 256, 8 heads of 32,
// 2 KV heads, FFN 704, vocabulary 64) on 2 x 64 tokens, 128 rows through
// every linear, in Megatron's precision (bf16 parameters, fp32 main
// gradients), with a Transformer Engine recipe on gpu.
func tePlan(recipe, gpu string) *core.Plan {
	m := testmodels.Llama(256, 1, 8, 2, 704, 64, "sdpa")
	p := testmodels.LlamaPlan(m, 2, 64, "megatron", "none", gpu)
	p.Float8 = core.Float8{Scaling: recipe}
	return p
}

// buffersNamed sums the program's buffers whose names end in suffix.
func buffersNamed(prog *core.Program, suffix string) (n int, bytes int64) {
	for _, b := range prog.Buffers {
		if strings.HasSuffix(b.Name, suffix) {
			n++
			bytes += b.Dtype.Bytes(core.Numel(b.Shape))
		}
	}
	return n, bytes
}

func savedBytes(prog *core.Program, op *core.OpInfo) (fp8, other int64) {
	for _, v := range op.Saved {
		if prog.Values[v].Dtype == units.FP8 {
			fp8 += prog.Values[v].Bytes
		} else {
			other += prog.Values[v].Bytes
		}
	}
	return fp8, other
}

// TestTEFloat8Linear hand-counts the TE linears of the tiny GPT
// (te_fp8.go). On an H100 (TN-only fp8 GEMMs) the attention input [2, 64,
// 256] is quantized once for q, k and v (Megatron's fused linear_qkv):
// rowwise 32,768 B, read by the GEMMs, and its transpose 32,768 B, the
// only thing they save (no bf16 input). Each weight keeps an fp8
// workspace and its transpose: q_proj 256 x 256 = 65,536 B each; all
// seven weights, 256·256·2 + 64·256·2 + 704·256·3 = 704,512 elements,
// twice. The backward quantizes grad_output with both usages: q_proj's
// 128 x 256 = 32,768 elements, 65,536 B. On a B200 one fp8 copy serves
// both usages: no transposes, half the grad_output workspace.
func TestTEFloat8Linear(t *testing.T) {
	const q = "layers.0.self_attn.q_proj"
	for _, c := range []struct {
		gpu                string
		workspace, saved   int64
		transposes, inputs int
		gradOut            int64
	}{
		{"H100-80GB", 2 * 704_512, 32_768, 7, 2, 65_536},
		{"B200", 704_512, 32_768, 0, 1, 32_768},
	} {
		prog := lower(t, tePlan("te-delayed", c.gpu))
		mm := matmulOf(t, prog, q)
		if dt := prog.Values[mm.In[0]].Dtype; dt != units.FP8 {
			t.Errorf("%s: q_proj's GEMM reads %s, want fp8", c.gpu, dt.Name())
		}
		f8, other := savedBytes(prog, mm)
		if f8 != c.saved || other != 0 {
			t.Errorf("%s: q_proj saves %d B fp8 and %d B other, want %d and 0", c.gpu, f8, other, c.saved)
		}
		if mm.WorkB != c.gradOut {
			t.Errorf("%s: q_proj backward workspace %d B, want %d", c.gpu, mm.WorkB, c.gradOut)
		}
		n, b := buffersNamed(prog, ".weight_fp8")
		nt, bt := buffersNamed(prog, ".weight_fp8_t")
		if n != 7 || nt != c.transposes || b+bt != c.workspace {
			t.Errorf("%s: %d weight workspaces and %d transposes, %d B, want 7, %d and %d B", c.gpu, n, nt, b+bt, c.transposes, c.workspace)
		}
		inputs := 0
		for _, v := range prog.Values {
			if strings.Contains(v.Name, "_proj.input_fp8") && !strings.Contains(v.Name, "o_proj") && !strings.Contains(v.Name, "mlp") {
				inputs++
				if v.Bytes != 32_768 {
					t.Errorf("%s: %s is %d B, want 32,768", c.gpu, v.Name, v.Bytes)
				}
			}
		}
		if inputs != c.inputs {
			t.Errorf("%s: %d fp8 copies of the attention input, want %d (q, k and v share them)", c.gpu, inputs, c.inputs)
		}
		if n, _ := buffersNamed(prog, "transformer_engine.cublas_workspace"); n != 1 {
			t.Errorf("%s: %d cuBLAS workspaces, want one", c.gpu, n)
		}
		if mm := matmulOf(t, prog, "lm_head"); prog.Values[mm.In[0]].Dtype == units.FP8 {
			t.Errorf("%s: the output layer runs in fp8; Megatron's is not a TE linear", c.gpu)
		}
	}
}

// TestTEFloat8State: the scaling state per TE module, fp32: delayed
// scaling's forward scale [3] and amax history [1, 3], backward [2] and
// [1, 2] (Megatron's --fp8-amax-history-len 1): 40 B; current scaling a
// scale and an amax per quantizer, 5 x 2 x 4 = 40 B. Seven modules. TE's
// cuBLAS workspace: 32 MiB on Hopper, 4 MiB on Ada (an L40S).
func TestTEFloat8State(t *testing.T) {
	for _, c := range []struct {
		recipe, gpu, suffix string
		cublas              int64
	}{
		{"te-delayed", "H100-80GB", "amax_history", 32 << 20},
		{"te-tensorwise", "L40S", "scale_amax", 4 << 20},
	} {
		prog := lower(t, tePlan(c.recipe, c.gpu))
		var state int64
		for _, s := range []string{".scale", ".amax_history", ".scale_amax"} {
			_, b := buffersNamed(prog, s)
			state += b
		}
		if n, _ := buffersNamed(prog, c.suffix); n < 7 || state != 7*40 {
			t.Errorf("%s: %d %s buffers, %d B of scaling state, want 7 modules' and %d B", c.recipe, n, c.suffix, state, 7*40)
		}
		if _, b := buffersNamed(prog, "cublas_workspace"); b != c.cublas {
			t.Errorf("%s on %s: cuBLAS workspace %d B, want %d", c.recipe, c.gpu, b, c.cublas)
		}
	}
}

// TestTEFloat8SequenceParallel: tp=2 with sequence parallelism. The
// local attention input [2, 32, 256] is quantized rowwise (16,384 B),
// all-gathered in fp8 ([2, 64, 256], 32,768 B: half a bf16 gather) and
// the local fp8 shard is what q_proj saves. Its backward holds the fp8
// grad_output and transpose (128 x 128 each: 32,768 B), the gathered
// input again with its transpose (65,536 B) and the full-sequence bf16
// input gradient before its reduce-scatter (65,536 B): 163,840 B.
func TestTEFloat8SequenceParallel(t *testing.T) {
	m := testmodels.Llama(256, 1, 8, 2, 704, 64, "sdpa")
	p := distPlan(t, m, "megatron", core.Parallelism{DP: 1, TP: 2, SequenceParallel: true, DistributedOptimizer: true})
	p.Batch, p.Seq = 2, 64
	p.Float8 = core.Float8{Scaling: "te-delayed"}
	prog := lower(t, p)
	mm := matmulOf(t, prog, "layers.0.self_attn.q_proj")
	if g := prog.Values[mm.In[0]]; g.Dtype != units.FP8 || g.Bytes != 32_768 {
		t.Errorf("q_proj reads %s of %d B, want the fp8 gathered input of 32,768 B", g.Dtype.Name(), g.Bytes)
	}
	if f8, other := savedBytes(prog, mm); f8 != 16_384 || other != 0 {
		t.Errorf("q_proj saves %d B fp8 and %d B other, want the local fp8 shard, 16,384 B", f8, other)
	}
	if mm.WorkB != 163_840 {
		t.Errorf("q_proj backward workspace %d B, want 163,840", mm.WorkB)
	}
	var gathered int64
	for _, c := range prog.Comm {
		if c.Kind == "all_gather" && !c.Backward {
			gathered += c.Bytes
		}
	}
	// forward gathers: attention and MLP inputs in fp8, 32,768 B each;
	// the output layer's input in bf16 (Megatron's own linear), 65,536 B.
	if gathered != 2*32_768+65_536 {
		t.Errorf("forward all-gathers %d B, want %d", gathered, 2*32_768+65_536)
	}
}

// TestTEFloat8GEMMRate: a TE linear's GEMM runs at the fp8 rate, as
// torchao's do (TestFloat8GEMMRate): 8,192 tokens through 8,192 -> 28,672
// on an H100, bf16 989.4 x 0.803 against fp8 1,979 x 0.709.
func TestTEFloat8GEMMRate(t *testing.T) {
	fwd := func(f8 string) float64 {
		m := testmodels.Llama(8192, 1, 64, 8, 28672, 128, "sdpa")
		p := testmodels.LlamaPlan(m, 1, 8192, "megatron", "none", "H100-80GB")
		p.Float8 = core.Float8{Scaling: f8}
		prog := lower(t, p)
		costs := timing.PriceOps(prog, p)
		return costs[opIndex(t, prog, "layers.0.mlp.up_proj")].Fwd
	}
	d, _ := hw.LookupDevice("H100-80GB")
	want := d.BF16TFLOPS * d.Rates().GEMM / (d.FP8TFLOPS * d.Rates().GEMMFP8)
	if got := fwd("te-delayed") / fwd(""); math.Abs(got/want-1) > 1e-9 {
		t.Errorf("fp8 / bf16 GEMM time %.4f, want %.4f", got, want)
	}
}

func opIndex(t *testing.T, prog *core.Program, module string) int {
	t.Helper()
	for i := range prog.Ops {
		if prog.Ops[i].Kind == "matmul" && prog.Ops[i].Module == module {
			return i
		}
	}
	t.Fatalf("no matmul in %s", module)
	return -1
}

// TestTEFloat8Errors: recipes and plans TE cannot run name their fix.
func TestTEFloat8Errors(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(p *core.Plan)
		want string
	}{
		{"A100", func(p *core.Plan) { p.Device, _ = hw.LookupDevice("A100-80GB") }, "needs fp8 tensor cores"},
		{"mxfp8 on Hopper", func(p *core.Plan) { p.Float8.Scaling = "te-mxfp8" }, "needs Blackwell"},
		{"blockwise on Blackwell", func(p *core.Plan) { p.Float8.Scaling = "te-blockwise"; p.Device, _ = hw.LookupDevice("B200") }, "Float8BlockScaling recipe runs on Hopper only"},
		{"unknown", func(p *core.Plan) { p.Float8.Scaling = "te-hybrid" }, `unknown float8 recipe "te-hybrid"`},
		{"torchao gather", func(p *core.Plan) { p.Float8.AllGather = true }, "fsdp_float8_all_gather=True is torchao's"},
		{"fsdp", func(p *core.Plan) { p.Parallel = core.Parallelism{DP: 2, FSDP: true} }, "under FSDP is not modelled"},
		{"compile", func(p *core.Plan) { p.Compile = core.Compile{Blocks: true} }, "torch.compile is not modelled"},
		{"MI300X", func(p *core.Plan) { p.Device, _ = hw.LookupDevice("MI300X") }, "ROCm"},
	} {
		p := tePlan("te-delayed", "H100-80GB")
		c.edit(p)
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	m := testmodels.Llama(256, 1, 8, 2, 680, 64, "sdpa") // 680 is not a multiple of 16
	p := testmodels.LlamaPlan(m, 2, 64, "megatron", "none", "H100-80GB")
	p.Float8 = core.Float8{Scaling: "te-delayed"}
	if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "divisible by 16") {
		t.Errorf("680 features: %v, want an error about TE's multiples of 16", err)
	}
}

// TestTEFloat8Eval: without autograd nothing needs a columnwise copy
// (linear.py: columnwise usage only when the weight or the input needs
// a gradient): no transposes of the weights or inputs, nothing saved.
func TestTEFloat8Eval(t *testing.T) {
	p := tePlan("te-delayed", "H100-80GB")
	p.Phase = core.Eval
	prog := lower(t, p)
	if n, _ := buffersNamed(prog, ".weight_fp8_t"); n != 0 {
		t.Errorf("eval: %d transposed weight workspaces, want 0", n)
	}
	if n, _ := buffersNamed(prog, ".weight_fp8"); n != 7 {
		t.Errorf("eval: %d weight workspaces, want 7", n)
	}
	for _, v := range prog.Values {
		if strings.HasSuffix(v.Name, "input_fp8_t") {
			t.Errorf("eval: %s made", v.Name)
		}
	}
	if mm := matmulOf(t, prog, "layers.0.self_attn.q_proj"); len(mm.Saved) != 0 {
		t.Errorf("eval: q_proj saves %d tensors", len(mm.Saved))
	}
}
