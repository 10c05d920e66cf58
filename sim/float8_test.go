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

// float8Plan is a one-block Llama (dim 256, 8 heads of 32, 2 KV heads,
// FFN 688, vocabulary 64) on 2 x 64 tokens in pure bf16 with torchao's
// float8 linears: 128 rows through every linear.
func float8Plan(scaling string, compile bool) *core.Plan {
	m := testmodels.Llama(256, 1, 8, 2, 688, 64, "sdpa")
	p := testmodels.LlamaPlan(m, 2, 64, "bf16", "none", "H100-80GB")
	p.Float8 = core.Float8{Scaling: scaling}
	p.Compile = core.Compile{Blocks: compile}
	return p
}

func lower(t *testing.T, p *core.Plan) *core.Program {
	t.Helper()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	prog, err := p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	return prog
}

func valueNamed(t *testing.T, prog *core.Program, name string) *core.ValueInfo {
	t.Helper()
	for i := range prog.Values {
		if prog.Values[i].Name == name {
			return &prog.Values[i]
		}
	}
	t.Fatalf("no value %s", name)
	return nil
}

func matmulOf(t *testing.T, prog *core.Program, module string) *core.OpInfo {
	t.Helper()
	for i := range prog.Ops {
		if op := &prog.Ops[i]; op.Kind == "matmul" && op.Module == module {
			return op
		}
	}
	t.Fatalf("no matmul in %s", module)
	return nil
}

// TestFloat8LinearEager hand-counts q_proj (256 -> 256, 128 rows) as a
// tensorwise Float8Linear in eager mode. Forward casts (torchao
// hp_tensor_to_float8_dynamic, _ToFloat8ConstrFunc): the input [2, 64,
// 256] gives abs in bf16 (65,536 B), one fp32 amax, an fp32 copy, the
// scaled and clamped fp32 tensors (131,072 B each) and the fp8 copy
// (32,768 B); the weight [256, 256] the same at 131,072, 262,144 and
// 65,536 B. The matmul reads both fp8 copies and saves only the bf16
// input (matmul_with_hp_or_float8_args saves input_hp and weight_hp_t,
// the weight being the parameter).
//
// Backward workspace, g = grad_output = 128 x 256 = 32,768, x = 32,768,
// w = 65,536 (float8BackwardWork's steps): 9g = 294,912; g + 9w =
// 622,592 (the weight's cast: fp32 scaled, fp32 clamped, fp8); g + 2w =
// 163,840; g + w + 9g = 393,216; 2g + w + 9x = 425,984; 3g + w + 2x =
// 229,376. The largest is the weight's cast: 622,592 B. lm_head (the
// output) stays a plain linear.
func TestFloat8LinearEager(t *testing.T) {
	prog := lower(t, float8Plan("tensorwise", false))
	const q = "layers.0.self_attn.q_proj."
	for _, c := range []struct {
		name  string
		dt    units.DType
		bytes int64
	}{
		{"input_fp8.abs", units.BF16, 65536}, {"input_fp8.amax", units.FP32, 4},
		{"input_fp8.fp32", units.FP32, 131072}, {"input_fp8.scaled", units.FP32, 131072},
		{"input_fp8.clamped", units.FP32, 131072}, {"input_fp8", units.FP8, 32768},
		{"weight_fp8.abs", units.BF16, 131072}, {"weight_fp8.fp32", units.FP32, 262144},
		{"weight_fp8.scaled", units.FP32, 262144}, {"weight_fp8.clamped", units.FP32, 262144},
		{"weight_fp8", units.FP8, 65536},
	} {
		v := valueNamed(t, prog, q+c.name)
		if v.Dtype != c.dt || v.Bytes != c.bytes || v.Grad {
			t.Errorf("%s: %s, %d B, grad %v; want %s, %d B, no grad", c.name, v.Dtype, v.Bytes, v.Grad, c.dt, c.bytes)
		}
	}
	op := matmulOf(t, prog, "layers.0.self_attn.q_proj")
	if len(op.In) != 3 || prog.Values[op.In[0]].Name != q+"input_fp8" || prog.Values[op.In[2]].Name != q+"weight_fp8" {
		t.Errorf("q_proj reads %v, want the fp8 input, the bf16 input and the fp8 weight", names(prog, op.In))
	}
	if len(op.Saved) != 1 || prog.Values[op.Saved[0]].Dtype != units.BF16 || prog.Values[op.Saved[0]].Bytes != 65536 {
		t.Errorf("q_proj saves %v, want its bf16 input (65,536 B)", names(prog, op.Saved))
	}
	if op.WorkB != 622592 {
		t.Errorf("q_proj backward workspace %d B, want 622,592", op.WorkB)
	}
	head := matmulOf(t, prog, "lm_head")
	if prog.Values[head.In[0]].Dtype != units.BF16 {
		t.Errorf("lm_head reads %s, want a plain bf16 linear", prog.Values[head.In[0]].Dtype)
	}
}

func names(prog *core.Program, vs []core.Value) []string {
	var out []string
	for _, v := range vs {
		out = append(out, prog.Values[v].Name)
	}
	return out
}

// TestFloat8LinearCompiled: compiled, each cast is one fused kernel. Of
// down_proj's input cast (688 features) only the fp8 copy exists; abs, the
// fp32 copies and the amax (a reduction, banned from recompute and so
// written) are computed in registers or are scalars. The backward holds
// g + max(w, x): g = 128 x 256 = 32,768, x = 128 x 688 = 88,064, w = 256 x
// 688 = 176,128, so 208,896 B.
func TestFloat8LinearCompiled(t *testing.T) {
	prog := lower(t, float8Plan("tensorwise", true))
	const d = "layers.0.mlp.down_proj."
	for _, n := range []string{"input_fp8.abs", "input_fp8.fp32", "input_fp8.scaled", "input_fp8.clamped", "weight_fp8.abs", "weight_fp8.scaled"} {
		if !valueNamed(t, prog, d+n).Fused {
			t.Errorf("%s is in memory, want it fused", n)
		}
	}
	for _, n := range []string{"input_fp8", "weight_fp8"} {
		if valueNamed(t, prog, d+n).Fused {
			t.Errorf("%s is fused, want it in memory (torch._scaled_mm reads it)", n)
		}
	}
	if op := matmulOf(t, prog, "layers.0.mlp.down_proj"); op.WorkB != 208896 {
		t.Errorf("down_proj backward workspace %d B, want 208,896", op.WorkB)
	}
}

// TestFloat8OpPolicyKeepsAbs: torchtitan's save list (9dec370) names
// aten.abs and aten.max. In eager mode the selective-checkpoint cache
// keeps every float8 cast's abs (as large as the tensor cast, in bf16)
// and tensorwise amax until the recompute. Compiled, the partitioner
// saves a MUST_SAVE value only when the backward reads it: the backward
// recomputes the casts of the linears whose matmul the policy recomputes
// (every second mm: k_proj, o_proj, up_proj). Tensorwise, their amax
// (aten.max, kept) is saved, two scalars each, and abs is not read.
// Rowwise, the amax is aten.amax, off the list and recomputed, so it
// reads abs: the abs of their inputs and weights is saved (torchtitan
// #820 removed abs from the list for this: +10.8 GiB on Llama 3 8B).
func TestFloat8OpPolicyKeepsAbs(t *testing.T) {
	for _, c := range []struct {
		scaling  string
		compile  bool
		abs, max int
	}{{"tensorwise", false, 2 * 7, 2 * 7}, {"tensorwise", true, 0, 2 * 3}, {"rowwise", true, 2 * 3, 0}} {
		p := float8Plan(c.scaling, c.compile)
		p.Checkpoint = core.Checkpoint{Mode: "op", Save: core.DefaultSaveOps()}
		prog := lower(t, p)
		kept := map[string]int{}
		for i := range prog.Ops {
			if op := &prog.Ops[i]; op.Keep {
				kept[op.Kind]++
			}
		}
		if kept["abs"] != c.abs || kept["max"] != c.max {
			t.Errorf("%s, compile %v: abs kept %d times, max %d; want %d and %d", c.scaling, c.compile, kept["abs"], kept["max"], c.abs, c.max)
		}
	}
}

// TestFloat8AllGather: with FSDP2 over 2 GPUs and float8 all-gather, the
// seven linears' weights of the block (4 x 256 x 256 less the grouped
// k and v: 65,536 + 16,384 + 16,384 + 65,536, and 3 x 176,128 for the
// MLP: 692,224 elements) are gathered in fp8, everything else (embedding
// and head 2 x 16,384, three norms 768) in bf16: each step gathers the
// block twice (forward and backward), the root unit (embedding, head and
// final norm: 33,024 elements, not resharded after forward) once:
// 2 x (692,224 + 2 x 512) + 2 x 33,024 = 1,452,544 B, against
// 2 x 2 x 692,736 + 2 x 33,024 = 2,836,992 B without. No weight is cast
// in the forward.
func TestFloat8AllGather(t *testing.T) {
	for _, ag := range []bool{false, true} {
		p := float8Plan("tensorwise", false)
		p.Precision, _ = core.LookupPrecision("bf16-mixed")
		p.Parallel = core.Parallelism{DP: 2, FSDP: true}
		p.Float8.AllGather = ag
		r := evalPlan(t, p)
		var got int64
		for _, s := range r.CommBytes {
			if s.Name == "all_gather" {
				got = s.Bytes
			}
		}
		want := int64(2836992)
		if ag {
			want = 1452544
		}
		if got != want {
			t.Errorf("all-gather in fp8 %v: %d B per step, want %d", ag, got, want)
		}
		prog := lower(t, p)
		casts := 0
		for _, v := range prog.Values {
			if strings.HasSuffix(v.Name, "weight_fp8") {
				casts++
			}
		}
		if want := map[bool]int{false: 7, true: 0}[ag]; casts != want {
			t.Errorf("all-gather in fp8 %v: %d weight casts, want %d", ag, casts, want)
		}
	}
}

// TestFloat8GEMMRate: a float8 linear's GEMM runs at the fp8 rate. For a
// compute-bound GEMM (8,192 tokens through 8,192 -> 28,672) the forward
// time falls by the ratio of the measured rates on an H100 SXM: bf16
// 989.4 TFLOPS x 0.803 against fp8 1,979 x 0.709 (hw.KernelRates), 0.5662.
func TestFloat8GEMMRate(t *testing.T) {
	fwd := func(f8 string) float64 {
		m := testmodels.Llama(8192, 1, 64, 8, 28672, 128, "sdpa")
		p := testmodels.LlamaPlan(m, 1, 8192, "bf16", "none", "H100-80GB")
		p.Float8 = core.Float8{Scaling: f8}
		prog := lower(t, p)
		costs := timing.PriceOps(prog, p)
		for i := range prog.Ops {
			if prog.Ops[i].Kind == "matmul" && prog.Ops[i].Module == "layers.0.mlp.up_proj" {
				return costs[i].Fwd
			}
		}
		t.Fatal("no up_proj")
		return 0
	}
	d, _ := hw.LookupDevice("H100-80GB")
	want := d.BF16TFLOPS * d.Rates().GEMM / (d.FP8TFLOPS * d.Rates().GEMMFP8)
	if got := fwd("tensorwise") / fwd(""); math.Abs(got/want-1) > 1e-9 || math.Abs(want-0.5662) > 1e-3 {
		t.Errorf("fp8 / bf16 GEMM time %.4f, want %.4f", got, want)
	}
}

// TestFloat8Errors: bad combinations name their fix.
func TestFloat8Errors(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(p *core.Plan)
		want string
	}{
		{"A100", func(p *core.Plan) { p.Device, _ = hw.LookupDevice("A100-80GB") }, "needs fp8 tensor cores"},
		{"unknown", func(p *core.Plan) { p.Float8.Scaling = "blockwise" }, `unknown float8 scaling "blockwise"`},
		{"gather without fsdp", func(p *core.Plan) { p.Float8.AllGather = true }, "needs FSDP2"},
		{"gather rowwise", func(p *core.Plan) {
			p.Float8 = core.Float8{Scaling: "rowwise", AllGather: true}
			p.Parallel = core.Parallelism{DP: 2, FSDP: true}
		}, "needs tensorwise scaling"},
		{"gather alone", func(p *core.Plan) { p.Float8 = core.Float8{AllGather: true} }, "needs float8 linears"},
		{"auto filter alone", func(p *core.Plan) { p.Float8 = core.Float8{AutoFilter: true} }, "float8_auto_filter=True needs float8 linears"},
		{"tp", func(p *core.Plan) { p.Parallel = core.Parallelism{TP: 2} }, "Megatron's tensor parallelism is not modelled"},
	} {
		p := float8Plan("tensorwise", false)
		c.edit(p)
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	m := testmodels.Llama(256, 1, 8, 2, 680, 64, "sdpa") // 680 is not a multiple of 16
	p := testmodels.LlamaPlan(m, 2, 64, "bf16", "none", "H100-80GB")
	p.Float8 = core.Float8{Scaling: "tensorwise"}
	r, err := Evaluate(p, core.Options{}) // torchtitan's filter leaves the MLP in bf16: a note, no error
	if err != nil {
		t.Fatalf("680 features: %v, want the MLP's linears left in bf16", err)
	}
	if notes := strings.Join(r.Notes, "\n"); !strings.Contains(notes, "gate_proj (256 -> 680), up_proj (256 -> 680), down_proj (680 -> 256)") {
		t.Errorf("680 features: notes %q, want the MLP's three linears named", notes)
	}
}
