package sim

import (
	"slices"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// opAllocs lists the bytes of the allocations named tensor that op makes in
// phase, in order.
func opAllocs(tr *replay.Trace, op, tensor string, phase replay.Phase) []int64 {
	var out []int64
	for _, e := range tr.Events {
		if e.Action == "alloc" && e.Op == op && e.Tensor == tensor && e.Phase == phase {
			out = append(out, e.Size)
		}
	}
	return out
}

// TestAllGatherCP counts torch's context_parallel() with its all-gather
// rotater by hand (sim/nn/ring_attention.go allGatherAttention) on a small
// Llama with SDPA (8 heads of 64, 2 key/value heads repeated to 8), bf16,
// one 2,048-token sequence over cp = 2: each rank holds 1,024 tokens.
// The kernel reads repeat_kv's keys and values, kv = 2 x 1,024 x 8 x 64 x
// 2 B = 2 MiB; the output in fp32 is o32 = 1,024 x 512 x 4 B = 2 MiB; q is
// 1 MiB in bf16.
//
//   - forward: the gathered keys and values of both ranks (2 x kv) and the
//     merger's four fp32 outputs (4 x o32): 12 MiB, as five tensors
//     [4, 2, 2, 2, 2] MiB.
//   - backward: the fp32 accumulators of dq (2 MiB), dk and dv (2 + 2
//     MiB), the gathered keys and values (4 MiB), SDPA's own fp32 dq
//     accumulator and softmax_d (2 MiB + 1,024 x 8 x 4 B = 32 KiB), a
//     step's bf16 dq, dk, dv (1 + 1 + 1 MiB), the fp32 dk, dv concatenated
//     (4 MiB) and the all-to-all's output (4 MiB): 23 MiB + 32 KiB as ten
//     tensors, in that order.
//
// Ring attention (cp_mode "ring") holds two chunks of the same keys and
// values in the forward and four in the backward instead, each as one
// workspace: 4 MiB, and 2 MiB + 32 KiB + 8 MiB.
func TestAllGatherCP(t *testing.T) {
	const mib, kib = 1 << 20, 1 << 10
	for _, tc := range []struct {
		mode          string
		forward, back []int64
	}{
		{"allgather", []int64{4 * mib, 2 * mib, 2 * mib, 2 * mib, 2 * mib},
			[]int64{2 * mib, 2 * mib, 2 * mib, 4 * mib, 2*mib + 32*kib, mib, mib, mib, 4 * mib, 4 * mib}},
		{"ring", []int64{4 * mib}, []int64{2*mib + 32*kib + 8*mib}},
	} {
		m := testmodels.Llama(512, 2, 8, 2, 1376, 32000, "sdpa")
		p := testmodels.LlamaPlan(m, 1, 2048, "bf16", "none", "H100-80GB")
		p.Parallel = core.Parallelism{CP: 2, CPMode: tc.mode}
		r, err := Evaluate(p, core.Options{Trace: true})
		if err != nil {
			t.Fatal(err)
		}
		const op = "layers.0.self_attn.sdpa_attention"
		if got := opAllocs(r.Trace, op, op+" workspace", replay.PhaseForward); !slices.Equal(got, tc.forward) {
			t.Errorf("%s: forward workspace %v, want %v", tc.mode, got, tc.forward)
		}
		if got := opAllocs(r.Trace, op, op+" backward workspace", replay.PhaseBackward); !slices.Equal(got, tc.back) {
			t.Errorf("%s: backward workspace %v, want %v", tc.mode, got, tc.back)
		}
	}
}
