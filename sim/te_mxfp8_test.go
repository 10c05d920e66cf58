package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
)

// TestTEMXFP8Linear hand-counts Transformer Engine's MXFP8 linears of the
// tiny GPT on a B200 (te_mxfp8.go), against current scaling there. An
// MXFP8 tensor of rows x cols has rowwise scales [round_up(rows, 128),
// round_up(cols/32, 4)] and columnwise ones [round_up(rows/32, 4),
// round_up(cols, 128)], a byte each.
//
//   - q_proj's input [128 rows, 256]: rowwise 32,768 + 128·8 and
//     columnwise 32,768 + 4·256 B, two copies (current scaling: one
//     serves both); it saves the columnwise one, 33,792 B.
//   - down_proj's input [128, 704]: 90,112 + 4·768 = 93,184 B saved.
//   - q_proj's grad_output [128, 256] with both usages: 65,536 + 1,024 +
//     1,024 = 67,584 B of backward workspace (current scaling: 32,768).
//   - the seven weights (704,512 elements) keep rowwise and columnwise
//     data, 1,409,024 B, and scales: rowwise q, o 256·8, k, v 128·8, gate,
//     up 768·8, down 256·24; columnwise q, o 8·256, k, v 4·256, gate, up
//     24·256, down 8·768: 24,576 each way; 1,458,176 B in all. No scaling
//     state (MXFP8BlockScalingRecipeState holds none); TE's 32 MiB cuBLAS
//     workspace.
func TestTEMXFP8Linear(t *testing.T) {
	for _, c := range []struct {
		recipe                       string
		qSaved, downSaved, qWork     int64
		buffers                      int64
		colwiseInputs, colwiseBuffer int
	}{
		{"te-mxfp8", 33_792, 93_184, 67_584, 1_458_176 + 32<<20, 1, 7},
		{"te-tensorwise", 32_768, 90_112, 32_768, 704_512 + 7*40 + 32<<20, 0, 0},
	} {
		prog := lower(t, tePlan(c.recipe, "B200"))
		for _, l := range []struct {
			module string
			saved  int64
		}{{"layers.0.self_attn.q_proj", c.qSaved}, {"layers.0.mlp.down_proj", c.downSaved}} {
			mm := matmulOf(t, prog, l.module)
			if f8, other := savedBytes(prog, mm); f8 != l.saved || other != 0 {
				t.Errorf("%s: %s saves %d B fp8 and %d B other, want %d and 0", c.recipe, l.module, f8, other, l.saved)
			}
		}
		if mm := matmulOf(t, prog, "layers.0.self_attn.q_proj"); mm.WorkB != c.qWork {
			t.Errorf("%s: q_proj backward workspace %d B, want %d", c.recipe, mm.WorkB, c.qWork)
		}
		var buffers int64
		for _, b := range prog.Buffers {
			buffers += b.Dtype.Bytes(core.Numel(b.Shape))
		}
		if buffers != c.buffers {
			t.Errorf("%s: buffers %d B, want %d", c.recipe, buffers, c.buffers)
		}
		if n, _ := buffersNamed(prog, ".weight_fp8_colwise"); n != c.colwiseBuffer {
			t.Errorf("%s: %d columnwise weight copies, want %d", c.recipe, n, c.colwiseBuffer)
		}
		n := 0
		for _, v := range prog.Values {
			if strings.HasSuffix(v.Name, "self_attn.q_proj.input_fp8_colwise") {
				n++
			}
		}
		if n != c.colwiseInputs {
			t.Errorf("%s: %d columnwise copies of q_proj's input, want %d", c.recipe, n, c.colwiseInputs)
		}
	}
}

// TestTEMXFP8SequenceParallel: tp=2 with sequence parallelism on a B200.
// The local attention input [2, 32, 256] (64 rows) is quantized with both
// usages (17,408 B each: 16,384 + 1,024 of scales), its rowwise copy
// all-gathered ([128, 256]: 32,768 + 128·8 = 33,792 B) and its columnwise
// copy saved (17,408 B). q_proj's backward holds grad_output [128, 128]
// both ways (32,768 + 128·4 + 4·128 = 33,792 B), the columnwise input
// gathered again (32,768 + 4·256 = 33,792 B) and the bf16 input gradient
// (65,536 B): 133,120 B. The forward all-gathers 2 x 33,792 B in MXFP8
// and the output layer's input in bf16, 65,536 B; the backward gathers
// the columnwise shards (32,768 + 4·256 B each).
func TestTEMXFP8SequenceParallel(t *testing.T) {
	comm := map[string][2]int64{} // forward and backward all-gather bytes by recipe
	for _, recipe := range []string{"te-mxfp8", "te-tensorwise"} {
		m := testmodels.Llama(256, 1, 8, 2, 704, 64, "sdpa")
		p := distPlan(t, m, "megatron", core.Parallelism{DP: 1, TP: 2, SequenceParallel: true, DistributedOptimizer: true})
		p.Batch, p.Seq = 2, 64
		p.Device, _ = hw.LookupDevice("B200")
		p.Float8 = core.Float8{Scaling: recipe}
		prog := lower(t, p)
		var c [2]int64
		for _, r := range prog.Comm {
			if r.Kind == "all_gather" && r.Backward {
				c[1] += r.Bytes
			} else if r.Kind == "all_gather" {
				c[0] += r.Bytes
			}
		}
		comm[recipe] = c
		if recipe != "te-mxfp8" {
			continue
		}
		mm := matmulOf(t, prog, "layers.0.self_attn.q_proj")
		if g := prog.Values[mm.In[0]]; g.Dtype != units.FP8 || g.Bytes != 33_792 {
			t.Errorf("q_proj reads %s of %d B, want the gathered MXFP8 input of 33,792 B", g.Dtype.Name(), g.Bytes)
		}
		if f8, other := savedBytes(prog, mm); f8 != 17_408 || other != 0 {
			t.Errorf("q_proj saves %d B fp8 and %d B other, want the local columnwise shard, 17,408 B", f8, other)
		}
		if mm.WorkB != 133_120 {
			t.Errorf("q_proj backward workspace %d B, want 133,120", mm.WorkB)
		}
		if c[0] != 2*33_792+65_536 {
			t.Errorf("forward all-gathers %d B, want %d", c[0], 2*33_792+65_536)
		}
	}
	// Both recipes gather 32,768 B of fp8 data per TE input each way;
	// MXFP8 adds its scales: 1,024 B rowwise forward, 1,024 B columnwise
	// backward, for the attention and the MLP input.
	mx, cs := comm["te-mxfp8"], comm["te-tensorwise"]
	if mx[0]-cs[0] != 2*1_024 || mx[1]-cs[1] != 2*1_024 {
		t.Errorf("MXFP8 all-gathers %+v B, current scaling %+v: want 2,048 more each way (the scales)", mx, cs)
	}
}

// TestTEMXFP8Errors: MXFP8 needs Blackwell and blocks of 32.
func TestTEMXFP8Errors(t *testing.T) {
	p := tePlan("te-mxfp8", "H100-80GB")
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "needs Blackwell") {
		t.Errorf("mxfp8 on an H100: %v, want an error saying it needs Blackwell", err)
	}
	m := testmodels.Llama(256, 1, 8, 2, 720, 64, "sdpa") // 720 is a multiple of 16, not of 32
	p = testmodels.LlamaPlan(m, 2, 64, "megatron", "none", "B200")
	p.Float8 = core.Float8{Scaling: "te-mxfp8"}
	if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "blocks of 32") {
		t.Errorf("720 features: %v, want an error about MXFP8's blocks of 32", err)
	}
}
