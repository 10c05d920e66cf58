package sim

import (
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
)

// TestTPRuntimeTorch counts by hand what DTensor's ColwiseParallel saves
// (parallel(tp_runtime="torch")) against Megatron's sequence-parallel
// linears, on a 2-layer Llama (dim 512) in bf16 over tp = 2 with sequence
// parallelism, one 2,048-token sequence, no checkpointing. Five inputs are
// all-gathered before column-parallel linears: each layer's attention
// input (q, k, v) and MLP input (gate, up), and the output layer's. Each
// is T x 512 x 2 B = 2 MiB gathered, 1 MiB sharded. Megatron saves the
// sharded input for the weight gradient and gathers it again in the
// backward (LinearWithGradAccumulationAndAsyncCommunication: one
// backward all-gather of 2 MiB per linear, 3 + 2 per layer and 1 for the
// output: 11); torch saves the gathered one (redistribute to Replicate,
// then the matmul), shared by the linears that read it, and gathers
// nothing again. Saved activations: 5 x (2 - 1) MiB more; all-gathered
// bytes: 11 x 2 MiB fewer.
func TestTPRuntimeTorch(t *testing.T) {
	const mib = 1 << 20
	m := testmodels.Llama(512, 2, 8, 2, 1376, 32000, "sdpa")
	reps := map[string]struct{ saved, gathered int64 }{}
	for _, rt := range []string{"megatron", "torch"} {
		p := testmodels.LlamaPlan(m, 1, 2048, "bf16", "none", "H100-80GB")
		p.Parallel = core.Parallelism{TP: 2, SequenceParallel: true, TPRuntime: rt}
		r := evalPlan(t, p)
		var g int64
		for _, c := range r.CommBytes {
			if c.Name == "all_gather" {
				g = c.Bytes
			}
		}
		reps[rt] = struct{ saved, gathered int64 }{r.SavedActivations, g}
	}
	meg, tor := reps["megatron"], reps["torch"]
	if d := tor.saved - meg.saved; d != 5*mib {
		t.Errorf("torch saves %d bytes more than megatron, want 5 MiB (%d)", d, 5*mib)
	}
	if d := meg.gathered - tor.gathered; d != 11*2*mib {
		t.Errorf("torch all-gathers %d bytes fewer than megatron, want 22 MiB (%d)", d, 22*mib)
	}
}
