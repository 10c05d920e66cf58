package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// TestTEGroupedBF16 holds Megatron-Core's experts in bf16 to Transformer
// Engine and Megatron (TransformerEngine d0067d0, Megatron-LM d98e8a64dd):
//
//   - TEGroupedMLP's GroupedLinear calls general_grouped_gemm in any
//     precision, which takes one cuBLAS workspace per stream (4 x 32 MiB
//     on an H100: cpp_extensions/gemm.py get_cublas_workspace(device,
//     False, True)); SequentialMLP ("sequential", no --moe-grouped-gemm)
//     runs a TE MLP per expert on general_gemm's one workspace;
//   - with --moe-router-dtype fp32 the probs are fp32, and TEGroupedMLP
//     casts the weighted activation back to its dtype (experts.py
//     l.1013-1015): fc2 saves it in bf16 and the block's output stays
//     bf16, not the fp32 product.
func TestTEGroupedBF16(t *testing.T) {
	for _, c := range []struct {
		impl, act  string
		workspaces int64
	}{
		{nn.MoEGrouped, "swiglu", 4 << 25},
		{nn.MoESequential, "swiglu", 0},
		{nn.MoEGrouped, "gelu", 4 << 25},
		{nn.MoESequential, "gelu", 0},
	} {
		m := &nn.MoE{Dim: 256, Hidden: 128, Experts: 4, TopK: 2, Act: c.act, NormTopK: true, Impl: c.impl}
		p := teMoEPlan(t, 40, "", "H100-80GB")
		p.Model.Layers[0] = m
		p.Parallel.RouterDType = units.FP32
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatalf("%s %s: %v", c.impl, c.act, err)
		}
		if _, b := buffersNamed(prog, "multi_stream_cublas_workspace"); b != c.workspaces {
			t.Errorf("%s %s: grouped GEMM workspaces %d B, want %d", c.impl, c.act, b, c.workspaces)
		}
		var fc2 int
		for i := range prog.Ops {
			op := &prog.Ops[i]
			if op.Kind != "grouped_matmul" {
				continue
			}
			if fc2++; fc2 != 2 && !(c.act == "swiglu" && fc2 == 3) {
				continue
			}
			for _, v := range op.Saved {
				if d := prog.Values[v].Dtype; d != units.BF16 {
					t.Errorf("%s %s: %s saves %s in %s, want bf16", c.impl, c.act, op.Name, prog.Values[v].Name, d.Name())
				}
			}
		}
		n := 0
		for _, v := range prog.Values {
			if strings.HasSuffix(v.Name, "combined") {
				if n++; v.Dtype != units.BF16 {
					t.Errorf("%s %s: the experts' combined output %s is %s, want bf16", c.impl, c.act, v.Name, v.Dtype.Name())
				}
			}
		}
		if n != 1 {
			t.Errorf("%s %s: %d combined outputs, want 1", c.impl, c.act, n)
		}
	}
}
