package sim

import (
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// TestTEBlockwiseLinear hand-counts Transformer Engine's Float8BlockScaling
// linears of the tiny GPT on an H100 (te_blockwise.go): fp32 scales, one
// per 1x128 block of activations and gradients (rowwise [ceil(cols/128),
// round_up(rows, 4)], columnwise [ceil(rows/128), round_up(cols, 4)]) and
// per 128x128 block of weights.
//
//   - q_proj's input [128 rows, 256]: rowwise 32,768 + 4·2·128 B and a
//     transposed copy 32,768 + 4·1·256 B; it saves the transposed one,
//     33,792 B. down_proj's input [128, 704]: 90,112 + 4·1·704 = 92,928 B.
//   - q_proj's grad_output [128, 256], both ways: 65,536 + 1,024 + 1,024
//     = 67,584 B.
//   - the seven weights keep an fp8 copy and its transpose (2 x 704,512
//     B) and 128x128 scales: [out, in] rowwise 4·ceil(out/128)·
//     round_up(ceil(in/128), 4), transposed 4·ceil(in/128)·
//     round_up(ceil(out/128), 4): q, o 32 and 32; k, v 16 and 32; gate,
//     up 96 and 64; down 64 and 96: 704 B. No scaling state; 32 MiB
//     cuBLAS workspace.
func TestTEBlockwiseLinear(t *testing.T) {
	prog := lower(t, tePlan("te-blockwise", "H100-80GB"))
	for _, l := range []struct {
		module string
		saved  int64
	}{{"layers.0.self_attn.q_proj", 33_792}, {"layers.0.mlp.down_proj", 92_928}} {
		mm := matmulOf(t, prog, l.module)
		if f8, other := savedBytes(prog, mm); f8 != l.saved || other != 0 {
			t.Errorf("%s saves %d B fp8 and %d B other, want %d and 0", l.module, f8, other, l.saved)
		}
	}
	if mm := matmulOf(t, prog, "layers.0.self_attn.q_proj"); mm.WorkB != 67_584 {
		t.Errorf("q_proj backward workspace %d B, want 67,584", mm.WorkB)
	}
	var buffers int64
	for _, b := range prog.Buffers {
		buffers += b.Dtype.Bytes(core.Numel(b.Shape))
	}
	if want := int64(2*704_512 + 704 + 32<<20); buffers != want {
		t.Errorf("buffers %d B, want %d", buffers, want)
	}
	if n, b := buffersNamed(prog, "_scale_inv"); n != 14 || b != 704 {
		t.Errorf("%d weight scale buffers of %d B, want 14 of 704", n, b)
	}
}

// TestTEBlockwiseSequenceParallel: tp=2 with sequence parallelism on an
// H100. Blockwise scaling gathers in bf16: the local attention input [2,
// 32, 256] (32,768 B) is all-gathered in bf16 (65,536 B) and quantized
// rowwise after the gather ([128, 256]: 32,768 + 4·2·128 = 33,792 B, what
// q_proj reads); q_proj saves the local bf16 input (32,768 B, nothing in
// fp8). Its backward holds grad_output [128, 128] both ways (32,768 +
// 512 + 512 = 33,792 B), the input gathered again in bf16 (65,536 B), its
// transposed fp8 copy (32,768 + 4·1·256 = 33,792 B) and the bf16 input
// gradient (65,536 B): 198,656 B. The forward all-gathers 65,536 B for
// each of the attention and MLP inputs and the output layer's.
func TestTEBlockwiseSequenceParallel(t *testing.T) {
	m := testmodels.Llama(256, 1, 8, 2, 704, 64, "sdpa")
	p := distPlan(t, m, "megatron", core.Parallelism{DP: 1, TP: 2, SequenceParallel: true, DistributedOptimizer: true})
	p.Batch, p.Seq = 2, 64
	p.Float8 = core.Float8{Scaling: "te-blockwise"}
	prog := lower(t, p)
	mm := matmulOf(t, prog, "layers.0.self_attn.q_proj")
	if g := prog.Values[mm.In[0]]; g.Dtype != units.FP8 || g.Bytes != 33_792 {
		t.Errorf("q_proj reads %s of %d B, want the gathered input quantized, 33,792 B", g.Dtype.Name(), g.Bytes)
	}
	if f8, other := savedBytes(prog, mm); f8 != 0 || other != 32_768 {
		t.Errorf("q_proj saves %d B fp8 and %d B other, want the local bf16 input, 32,768 B", f8, other)
	}
	if mm.WorkB != 198_656 {
		t.Errorf("q_proj backward workspace %d B, want 198,656", mm.WorkB)
	}
	var fwd int64
	for _, c := range prog.Comm {
		if c.Kind == "all_gather" && !c.Backward {
			fwd += c.Bytes
		}
	}
	if fwd != 3*65_536 {
		t.Errorf("forward all-gathers %d B, want %d", fwd, 3*65_536)
	}
}
