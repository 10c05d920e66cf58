package sim

import (
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
)

// TestMegatronFusedLinearComm counts by hand the tensor-parallel
// collectives one micro-batch records for a Llama of L = 3 layers (dim
// 1024, 8 heads of which 2 for k/v, ffn 2816, vocab 32000), one sequence
// of 2048 tokens, tp 4. Megatron-Core's linear_qkv and linear_fc1 run
// their input's backward collective once each (core/tp.go,
// recordInputComm): without sequence parallelism two backward
// all-reduces of the layer input's gradient a layer ("two all-reduces in
// the forward and two in the backward", Shoeybi et al. 2019, Fig. 4) plus
// the output layer's, 2L + 1 = 7, each [2048, 1024] bf16 = 4 MiB; with
// it, two re-gathers of the saved input a layer plus the output layer's,
// again 7 of 4 MiB. Under precision "bf16-mixed" (DTensor-style separate
// linears) each of q, k, v, gate and up records its own: 5L + 1 = 16.
func TestMegatronFusedLinearComm(t *testing.T) {
	const layers, tokens, dim = 3, 2048, 1024
	const inputBytes = tokens * dim * 2
	for _, row := range []struct {
		name      string
		precision string
		sp        bool
		kind      string
		want      int
	}{
		{"megatron, no SP: input-gradient all-reduces", "megatron", false, "all_reduce", 2*layers + 1},
		{"megatron, SP: re-gathers of the saved input", "megatron", true, "all_gather", 2*layers + 1},
		{"bf16-mixed, no SP: one per linear", "bf16-mixed", false, "all_reduce", 5*layers + 1},
	} {
		m := testmodels.Llama(dim, layers, 8, 2, 2816, 32000, "flash")
		p := testmodels.LlamaPlan(m, 1, tokens, row.precision, "none", "H100-80GB")
		p.Parallel = core.Parallelism{TP: 4, SequenceParallel: row.sp}
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for _, c := range prog.Comm {
			// the input-side backward collectives: an all-gather beside a
			// dgrad GEMM, an all-reduce beside a wgrad one (not the
			// row-parallel linears' output-gradient gathers, c.UB)
			if c.Group != "tp" || !c.Backward || c.Kind != row.kind || (row.sp && (!c.Dgrad || c.UB)) {
				continue
			}
			got++
			if c.Bytes != inputBytes {
				t.Errorf("%s: a %s of %d B, want %d", row.name, c.Kind, c.Bytes, inputBytes)
			}
		}
		if got != row.want {
			t.Errorf("%s: %d backward %s records, hand count %d", row.name, got, row.kind, row.want)
		}
	}
}
