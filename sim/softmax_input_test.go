package sim

import (
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
)

// TestSoftmaxSavesInput: torch <= 1.10 (runtime "cuda-1.10") keeps a
// softmax's input for the backward besides its output. On a small Llama
// (4 layers of 8 heads, eager attention, vocab 32,000), batch 2, seq
// 1024, each layer's scores are 2 x 8 x 1024 x 1024 elements, and the
// loss's log_softmax reads the fp32 logits, 2 x 1024 x 32,000 x 4 B =
// 262,144,000 B. The attention softmax reads an fp32 copy of the bf16
// scores and keeps it, 64 MiB a layer: in pure bf16 softmax(x,
// dtype=torch.float32) converts a bf16 input first (the fused
// half_to_float kernel is for fp16 only: aten/src/ATen/native/SoftMax.cpp,
// softmax, the same test at v1.10.0), under autocast autocast's copy.
func TestSoftmaxSavesInput(t *testing.T) {
	const scores = 2 * 8 * 1024 * 1024
	const logits = 2 * 1024 * 32000 * 4
	m := testmodels.Llama(512, 4, 8, 2, 1376, 32000, "eager")
	for _, tc := range []struct {
		precision string
		want      int64
	}{
		{"bf16", 4*scores*4 + logits},
		{"bf16-mixed", 4*scores*4 + logits},
	} {
		old, err := core.LookupRuntime("cuda-1.10")
		if err != nil {
			t.Fatal(err)
		}
		fixed := old // the same runtime but for the softmax
		fixed.SoftmaxSavesInput = false
		saved := map[bool]int64{}
		for _, rt := range []core.Runtime{old, fixed} {
			p := testmodels.LlamaPlan(m, 2, 1024, tc.precision, "none", "H100-80GB")
			p.Runtime = rt
			saved[rt.SoftmaxSavesInput] = evalPlan(t, p).SavedActivations
		}
		if got := saved[true] - saved[false]; got != tc.want {
			t.Errorf("%s: torch 1.10 saves %d B more, want %d", tc.precision, got, tc.want)
		}
	}
}
