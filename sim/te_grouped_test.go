package sim

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/timing"
	"github.com/memsh/memsh/sim/units"
)

// teMoEPlan is one Megatron MoE block (dim 256, 4 experts of 128, top-2,
// grouped) on seq tokens in precision "megatron" on gpu, with float8
// recipe (none when empty).
func teMoEPlan(t *testing.T, seq int64, recipe, gpu string) *core.Plan {
	t.Helper()
	m := &nn.MoE{Dim: 256, Hidden: 128, Experts: 4, TopK: 2, Act: "swiglu", NormTopK: true, Impl: nn.MoEGrouped}
	p := moeBlockPlan(t, m, seq, "megatron")
	d, err := hw.LookupDevice(gpu)
	if err != nil {
		t.Fatal(err)
	}
	p.Device = d
	p.Float8 = core.Float8{Scaling: recipe}
	return p
}

func opNamed(prog *core.Program, kind, module string) *core.OpInfo {
	for i := range prog.Ops {
		if op := &prog.Ops[i]; op.Kind == kind && op.Module == module {
			return op
		}
	}
	return nil
}

// TestTEGroupedExperts hand-counts TE's fp8 GroupedLinear experts
// (core/te_grouped.go) on 40 tokens: 80 routed copies, 20 per expert,
// which Megatron's Fp8Padding rounds up to 32 each: the permuted rows
// [80, 256] bf16 become [128, 256] (65,536 B), the probs (bf16, as the
// router hands them) [128, 1] (256 B); the output [128, 256] is unpadded back to [80, 256] (40,960 B).
//
// On an H100: gate and up (Megatron's fc1) read one fp8 copy of the
// padded rows (32,768 B) and save its transpose (32,768 B), nothing in
// bf16; down saves the transpose of its fp8 input [128, 128] (16,384 B).
// Weight workspaces, one per expert: gate and up 4 x 128 x 256, down 4 x
// 256 x 128, 131,072 B each, and their transposes (dgrad): 786,432 B.
// Delayed scaling per GroupedLinear of 4 GEMMs: forward scale [12] and
// amax history [1, 12], backward [8] and [1, 8], 160 B, for fc1 (once)
// and fc2: 320 B. The grouped GEMMs' four cuBLAS workspaces of 32 MiB
// beside TE's one. grad_output quantized with both usages: gate 128 x 128
// twice (32,768 B), down 128 x 256 twice (65,536 B).
//
// Saved against the same block in bf16 (Megatron's grouped experts): the
// bf16 run saves the permuted rows (40,960 B), the down input [80, 128]
// (20,480 B), the fused SwiGLU's gate, up (20,480 B each) and probs (160
// B): 102,560 B; the fp8 run the two transposes (49,152 B) and the
// SwiGLU's padded gate, up (32,768 B each) and probs (256 B): 114,944 B,
// 12,384 B more. Nothing else saved changes. On a B200 one fp8 copy serves
// both usages: no transposes, half the grad_output workspace.
func TestTEGroupedExperts(t *testing.T) {
	const ex = "moe.experts."
	for _, c := range []struct {
		gpu                  string
		transposes           int64
		gateWork, downWork   int64
		gateSaved, downSaved int64
	}{
		{"H100-80GB", 393_216, 32_768, 65_536, 32_768, 16_384},
		{"B200", 0, 16_384, 32_768, 32_768, 16_384},
	} {
		prog := lower(t, teMoEPlan(t, 40, "te-delayed", c.gpu))
		for _, v := range []struct {
			name  string
			bytes int64
		}{{"moe.experts.permuted_padded", 65_536}, {"moe.experts.permuted_probs_padded", 256}, {"moe.experts.unpadded", 40_960}, {ex + "gate_proj.input_fp8", 32_768}} {
			if got := valueNamed(t, prog, v.name).Bytes; got != v.bytes {
				t.Errorf("%s: %s is %d B, want %d", c.gpu, v.name, got, v.bytes)
			}
		}
		for _, p := range []struct {
			module      string
			saved, work int64
		}{{ex + "gate_proj", c.gateSaved, c.gateWork}, {ex + "up_proj", c.gateSaved, c.gateWork}, {ex + "down_proj", c.downSaved, c.downWork}} {
			op := opNamed(prog, "grouped_matmul", p.module)
			if op == nil {
				t.Fatalf("%s: no grouped GEMM in %s", c.gpu, p.module)
			}
			if dt := prog.Values[op.In[0]].Dtype; dt != units.FP8 {
				t.Errorf("%s: %s reads %s, want fp8", c.gpu, p.module, dt.Name())
			}
			if f8, other := savedBytes(prog, op); f8 != p.saved || other != 0 {
				t.Errorf("%s: %s saves %d B fp8 and %d B other, want %d and 0", c.gpu, p.module, f8, other, p.saved)
			}
			if op.WorkB != p.work {
				t.Errorf("%s: %s backward workspace %d B, want %d", c.gpu, p.module, op.WorkB, p.work)
			}
		}
		n, w := buffersNamed(prog, ".weight_fp8")
		_, wt := buffersNamed(prog, ".weight_fp8_t")
		if n != 3 || w != 393_216 || wt != c.transposes {
			t.Errorf("%s: %d weight workspaces of %d B, transposes %d B; want 3 of 393,216 B and %d B", c.gpu, n, w, wt, c.transposes)
		}
		var state int64
		for _, s := range []string{".scale", ".amax_history"} {
			_, b := buffersNamed(prog, s)
			state += b
		}
		if state != 320 {
			t.Errorf("%s: %d B of delayed scaling state, want 320 (fc1's and fc2's, 4 GEMMs each)", c.gpu, state)
		}
		if _, b := buffersNamed(prog, "multi_stream_cublas_workspace"); b != 4<<25 {
			t.Errorf("%s: grouped GEMM cuBLAS workspaces %d B, want 4 x 32 MiB", c.gpu, b)
		}
	}
	fp8 := evalPlan(t, teMoEPlan(t, 40, "te-delayed", "H100-80GB")).SavedActivations
	bf16 := evalPlan(t, teMoEPlan(t, 40, "", "H100-80GB")).SavedActivations
	if fp8-bf16 != 12_384 {
		t.Errorf("fp8 experts save %d B, bf16 %d B: %+d, want +12,384", fp8, bf16, fp8-bf16)
	}
}

// TestTEGroupedNoPadding: at 64 tokens every expert gets 32 rows, a
// multiple of 16: Fp8Padding and Fp8Unpadding return their input, no
// copy is made.
func TestTEGroupedNoPadding(t *testing.T) {
	prog := lower(t, teMoEPlan(t, 64, "te-tensorwise", "H100-80GB"))
	for _, op := range prog.Ops {
		if strings.Contains(op.Name, "padding") {
			t.Errorf("op %s at 32 rows per expert: no padding wanted", op.Name)
		}
	}
	// current scaling: a scale and an amax per quantizer, 5 per GEMM: 160 B per GroupedLinear
	if _, b := buffersNamed(prog, ".scale_amax"); b != 320 {
		t.Errorf("current scaling state %d B, want 320", b)
	}
}

// TestTEGroupedRefusals: what TE's fp8 on experts does not model fails
// with a hint, not a panic.
func TestTEGroupedRefusals(t *testing.T) {
	for _, c := range []struct {
		name, recipe, gpu, impl, prec, want string
		bias, gather                        bool
	}{
		{"loop experts", "te-delayed", "H100-80GB", nn.MoELoop, "megatron", "TEGroupedMLP only", false, false},
		{"not megatron", "te-delayed", "H100-80GB", nn.MoEGrouped, "bf16", "TEGroupedMLP only", false, false},
		{"mxfp8", "te-mxfp8", "B200", nn.MoEGrouped, "megatron", "te-mxfp8 recipe on grouped experts", false, false},
		{"blockwise", "te-blockwise", "H100-80GB", nn.MoEGrouped, "megatron", "te-blockwise recipe on grouped experts", false, false},
		{"expert biases", "te-delayed", "H100-80GB", nn.MoEGrouped, "megatron", "no expert biases", true, false},
		{"fp8 primary weights", "te-tensorwise", "H100-80GB", nn.MoEGrouped, "megatron", "fp8_param_gather=True with grouped experts", false, true},
	} {
		m := &nn.MoE{Dim: 256, Hidden: 128, Experts: 4, TopK: 2, Act: "swiglu", Impl: c.impl, ExpertBias: c.bias}
		p := moeBlockPlan(t, m, 64, c.prec)
		p.Device, _ = hw.LookupDevice(c.gpu)
		p.Float8 = core.Float8{Scaling: c.recipe, ParamGather: c.gather}
		p.Parallel.DistributedOptimizer = c.gather
		if err := p.Validate(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		_, err := p.LowerProgram()
		var ue *units.Error
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &ue) || ue.Hint == "" {
			t.Errorf("%s: got %v, want an error naming %q with a hint", c.name, err, c.want)
		}
	}
}

// TestTEGroupedGEMMRate: the fp8 grouped GEMMs run at the fp8 rate, as a
// TE linear's do (TestTEFloat8GEMMRate): 16,384 routed rows (8 experts of
// 2,048, no padding) through down_proj 1,536 -> 4,096 on an H100, bf16
// 989.4 x 0.803 against fp8 1,979 x 0.709.
func TestTEGroupedGEMMRate(t *testing.T) {
	fwd := func(f8 string) float64 {
		m := &nn.MoE{Dim: 4096, Hidden: 1536, Experts: 8, TopK: 2, Act: "swiglu", NormTopK: true, Impl: nn.MoEGrouped}
		p := moeBlockPlan(t, m, 8192, "megatron")
		p.Device, _ = hw.LookupDevice("H100-80GB")
		p.Float8 = core.Float8{Scaling: f8}
		prog := lower(t, p)
		costs := timing.PriceOps(prog, p)
		for i, op := range prog.Ops {
			if op.Kind == "grouped_matmul" && (op.Module == "moe.experts.down_proj" || op.Name == "moe.experts.down_proj") {
				return costs[i].Fwd
			}
		}
		t.Fatalf("%q: no grouped GEMM for down_proj", f8)
		return 0
	}
	d, _ := hw.LookupDevice("H100-80GB")
	want := d.BF16TFLOPS * d.Rates().GEMM / (d.FP8TFLOPS * d.Rates().GEMMFP8)
	if got := fwd("te-delayed") / fwd(""); math.Abs(got/want-1) > 1e-9 {
		t.Errorf("fp8 / bf16 grouped GEMM time %.4f, want %.4f", got, want)
	}
}
