package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// float8TPPlan is float8Plan's one-block Llama (dim 256, 8 heads of 32,
// 2 KV heads, 2 x 64 tokens) with FFN 704 rather than 688 (688 / 2 = 344
// is no multiple of 16, a shard torch._scaled_mm refuses) over tp=2 with
// sequence parallelism and DTensor's tensor parallelism, as torchtitan
// applies torchao's Float8ColwiseParallel and Float8RowwiseParallel.
func float8TPPlan(compile bool) *core.Plan {
	p := float8Plan("tensorwise", compile)
	p.Model = testmodels.Llama(256, 1, 8, 2, 704, 64, "sdpa")
	p.Parallel = core.Parallelism{TP: 2, SequenceParallel: true, TPRuntime: "torch"}
	return p
}

// TestFloat8TPLinears hand-counts the attention's float8 linears under
// tp=2 (core/float8_tp.go). PrepareFloat8ModuleInput casts the
// sequence-sharded input [2, 32, 256] to fp8 (16,384 B) and all-gathers
// it in fp8: [2, 64, 256], 32,768 B, whose gradient is bf16 (65,536 B,
// the sum of q, k and v's input gradients). q_proj
// (256 -> 128 on this rank) saves that gathered fp8 input and its fp8
// weight copy [128, 256], 32,768 B (manual_float8_matmul_with_args_in_
// float8 at torchao eab345c). o_proj (128 -> 256, row-parallel) casts its
// local input [2, 64, 128] to fp8 (16,384 B) and saves it.
//
// Backward workspace (float8TPBackwardWork), q_proj: g = 128 x 128 =
// 16,384 elements of grad_output, all cast here, x = 128 x 256 = 32,768,
// w = 32,768: g + w = 49,152, 2g + x = 65,536, the eager cast 9g =
// 147,456: 147,456 B eager, 65,536 compiled. o_proj: g = 128 x 256 =
// 32,768, its sequence half cast (c = 16,384), x = 128 x 128 = 16,384,
// w = 32,768: g + w = 65,536, 2g + x = 81,920, 9c = 147,456, c + g =
// 49,152: 147,456 B eager, 81,920 compiled.
func TestFloat8TPLinears(t *testing.T) {
	for _, c := range []struct {
		compile    bool
		qWork, oWk int64
	}{{false, 147456, 147456}, {true, 65536, 81920}} {
		prog := lower(t, float8TPPlan(c.compile))
		const a = "layers.0.self_attn."
		for _, v := range []struct {
			name   string
			bytes  int64
			grad   units.DType
			gbytes int64
		}{
			{a + "input_fp8", 16384, units.InvalidDType, 0}, {a + "gathered_fp8", 32768, units.BF16, 65536},
			{a + "q_proj.weight_fp8", 32768, units.InvalidDType, 0}, {a + "o_proj.input_fp8", 16384, units.InvalidDType, 0},
		} {
			got := valueNamed(t, prog, v.name)
			gdt, gb := got.GradBytes()
			if got.Dtype != units.FP8 || got.Bytes != v.bytes || got.Grad != (v.gbytes > 0) || got.Grad && (gdt != v.grad || gb != v.gbytes) {
				t.Errorf("compile %v, %s: %s, %d B, grad %v (%s, %d B); want fp8, %d B, grad %s, %d B", c.compile, v.name, got.Dtype, got.Bytes, got.Grad, gdt, gb, v.bytes, v.grad, v.gbytes)
			}
		}
		gathers := 0
		for i := range prog.Ops {
			if op := &prog.Ops[i]; op.Kind == "all_gather" && prog.Values[op.Out[0]].Dtype == units.FP8 {
				gathers++
			}
		}
		if gathers != 2 { // one before the attention, one before the MLP
			t.Errorf("compile %v: %d fp8 all-gathers, want 2 (shared by the linears reading them; lm_head gathers in bf16)", c.compile, gathers)
		}
		q := matmulOf(t, prog, a+"q_proj")
		if n := names(prog, q.In); len(n) != 2 || n[0] != a+"gathered_fp8" || n[1] != a+"q_proj.weight_fp8" {
			t.Errorf("compile %v: q_proj reads %v, want the gathered fp8 input and the fp8 weight", c.compile, n)
		}
		o := matmulOf(t, prog, a+"o_proj")
		if n := names(prog, o.In); len(n) != 3 || n[0] != a+"o_proj.input_fp8" || n[2] != a+"o_proj.weight_fp8" {
			t.Errorf("compile %v: o_proj reads %v, want its fp8 input, its bf16 input (for the gradient) and the fp8 weight", c.compile, n)
		}
		if q.WorkB != c.qWork {
			t.Errorf("compile %v: q_proj backward workspace %d B, want %d", c.compile, q.WorkB, c.qWork)
		}
		if o.WorkB != c.oWk {
			t.Errorf("compile %v: o_proj backward workspace %d B, want %d", c.compile, o.WorkB, c.oWk)
		}
		if !c.compile {
			if n := names(prog, q.Saved); len(n) != 2 || n[0] != a+"gathered_fp8" || n[1] != a+"q_proj.weight_fp8" {
				t.Errorf("q_proj saves %v, want the gathered fp8 input and the fp8 weight", n)
			}
		}
	}
}

// TestFloat8TPErrors: what torchao's tensor-parallel styles do not cover
// names its fix.
func TestFloat8TPErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(p *core.Plan)
		want string
	}{
		{"megatron", func(p *core.Plan) { p.Parallel.TPRuntime = "" }, "Megatron's tensor parallelism is not modelled"},
		{"rowwise", func(p *core.Plan) { p.Float8.Scaling = "rowwise" }, "rowwise scaling with tensor parallelism is not modelled"},
		{"auto filter", func(p *core.Plan) { p.Float8.AutoFilter = true }, "float8_auto_filter=True with tensor parallelism"},
	} {
		p := float8TPPlan(false)
		c.edit(p)
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// TestFloat8TPWithoutSP: without sequence parallelism
// PrepareFloat8ModuleInput only casts (the input is replicated already):
// no all-gather, the fp8 input [2, 64, 256] (32,768 B) read by q, k and v,
// their input gradient sent to the bf16 input and all-reduced (65,536 B,
// as lm_head's, a bf16 column-parallel linear).
func TestFloat8TPWithoutSP(t *testing.T) {
	p := float8TPPlan(false)
	p.Parallel.SequenceParallel = false
	prog := lower(t, p)
	const a = "layers.0.self_attn."
	for i := range prog.Ops {
		if op := &prog.Ops[i]; op.Kind == "all_gather" {
			t.Errorf("an all-gather (%s) without sequence parallelism", op.Name)
		}
	}
	if v := valueNamed(t, prog, a+"input_fp8"); v.Bytes != 32768 || v.Grad {
		t.Errorf("the attention's fp8 input: %d B, grad %v; want 32,768 B, no grad", v.Bytes, v.Grad)
	}
	q := matmulOf(t, prog, a+"q_proj")
	if n := names(prog, q.In); len(n) != 3 || n[0] != a+"input_fp8" || n[2] != a+"q_proj.weight_fp8" {
		t.Errorf("q_proj reads %v, want the fp8 input, the bf16 input and the fp8 weight", n)
	}
	reduces := 0
	for _, c := range prog.Comm {
		if c.Kind == "all_reduce" && c.Backward && c.Bytes == 65536 {
			reduces++
		}
	}
	if reduces != 6 { // q, k, v, gate and up, and lm_head's (a bf16 linear)
		t.Errorf("%d backward all-reduces of a 65,536 B input gradient, want one per column-parallel linear (6)", reduces)
	}
}

// TestFloat8TPShapeErrors: a linear torchtitan leaves in high precision
// (a full dimension not a multiple of 16) cannot take
// Float8ColwiseParallel, and a shard that is not a multiple of 16 is one
// torch._scaled_mm refuses (mat2's dimensions must divide by 16): both
// are errors naming the linear, not figures.
func TestFloat8TPShapeErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		ffn  int64
		want string
	}{
		{"FFN 520: left in bf16 by torchtitan's filter", 520, "torchtitan leaves gate_proj (256 -> 520) in high precision"},
		{"FFN 688: 344 a rank", 688, "gate_proj's shard on a tensor-parallel rank (256 -> 344 of 256 -> 688) is not a multiple of 16"},
	} {
		p := float8TPPlan(false)
		p.Model = testmodels.Llama(256, 1, 8, 2, c.ffn, 64, "sdpa")
		if err := p.Validate(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		_, err := p.LowerProgram()
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "layers.0.mlp.gate_proj") {
			t.Errorf("%s: %v, want an error at layers.0.mlp.gate_proj saying %q", c.name, err, c.want)
		}
		// The layout's refusal, not the model's: search() rejects the
		// layout with it (core.LayoutError), and the model lowers at tp=1.
		var le *core.LayoutError
		var se *units.Error
		if !errors.As(err, &le) || !errors.As(err, &se) || se.Hint == "" {
			t.Errorf("%s: %#v is not a core.LayoutError wrapping an engine error with a hint", c.name, err)
		}
		p.Parallel = core.Parallelism{TP: 1}
		if _, err := p.LowerProgram(); err != nil {
			t.Errorf("%s at tp=1: %v", c.name, err)
		}
	}
}

// TestFloat8TokensAligned: a training Float8Linear's tokens are the inner
// dimension of its grad_weight GEMM, which torch._scaled_mm needs a
// multiple of 16 (torchao pads it only with pad_inner_dim=True). Batch 2
// x seq 60 = 120 tokens is refused as the layout's error at the first
// converted linear, with and without tensor parallelism (under sequence
// parallelism the gathered tokens); 2 x 64 = 128 lowers, and so does an
// evaluation of 120 (no grad_weight).
func TestFloat8TokensAligned(t *testing.T) {
	for _, c := range []struct {
		name string
		plan func() *core.Plan
	}{
		{"tp 1", func() *core.Plan { return float8Plan("tensorwise", false) }},
		{"tp 2 sequence parallel", func() *core.Plan { return float8TPPlan(false) }},
	} {
		p := c.plan()
		p.Seq = 60
		_, err := p.LowerProgram()
		var le *core.LayoutError
		var se *units.Error
		if err == nil || !strings.Contains(err.Error(), "holds 120 tokens on a rank, not a multiple of 16") ||
			!strings.Contains(err.Error(), "layers.0.self_attn.q_proj") || !errors.As(err, &le) || !errors.As(err, &se) || se.Hint == "" {
			t.Errorf("%s, seq 60: %v, want the layout's error at layers.0.self_attn.q_proj naming 120 tokens, with a hint", c.name, err)
		}
		p.Phase = core.Eval
		if _, err := p.LowerProgram(); err != nil {
			t.Errorf("%s, seq 60 evaluated: %v", c.name, err)
		}
		p = c.plan()
		if _, err := p.LowerProgram(); err != nil {
			t.Errorf("%s, seq 64: %v", c.name, err)
		}
	}
}
