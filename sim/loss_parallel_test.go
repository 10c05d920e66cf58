package sim

import (
	"slices"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// lossAllocs lists the bytes op allocates in phase, in order.
func lossAllocs(tr *replay.Trace, op string, phase replay.Phase) []int64 {
	var out []int64
	for _, e := range tr.Events {
		if e.Action == "alloc" && e.Op == op && e.Phase == phase {
			out = append(out, e.Size)
		}
	}
	return out
}

// TestTorchLossParallel counts torch's loss_parallel() by hand
// (sim/core/loss_parallel.go) on a small Llama over tp = 2: 2 x 1,024
// tokens, a 32,000-word vocabulary, so each rank's logits shard is 2,048 x
// 16,000: E32 = 131,072,000 bytes in fp32, E16 = 65,536,000 in bf16.
//
//   - logits upcast to fp32 (torchtitan's .float()): the forward keeps the
//     log-probabilities (E32) and the loss (4 bytes) and, beside them, the
//     shifted logits or
//     their exponentials (E32); the backward allocates zeros_like(result)
//     and exp(result) (E32 each), then the gradient (E32).
//   - bf16 logits: the forward computes in fp32 all the same (the input's
//     fp32 copy, shifted, their exponentials: 3 x E32 beyond the input),
//     keeping the result in bf16 (E16, then 3 x E32 - E16 of workspace);
//     the backward runs in the result's dtype: three E16.
func TestTorchLossParallel(t *testing.T) {
	const e32, e16 = 131_072_000, 65_536_000
	for _, tc := range []struct {
		name          string
		fp32          bool
		forward, back []int64
	}{
		{"fp32 logits", true, []int64{e32, 4, e32}, []int64{e32, e32, e32}},
		{"bf16 logits", false, []int64{e16, 4, 3*e32 - e16}, []int64{e16, e16, e16}},
	} {
		m := testmodels.Llama(512, 2, 8, 2, 1376, 32000, "flash")
		m.LogitsFP32 = tc.fp32
		p := testmodels.LlamaPlan(m, 2, 1024, "bf16", "none", "H100-80GB")
		p.Parallel = core.Parallelism{TP: 2, SequenceParallel: true, LossParallel: "torch"}
		r, err := Evaluate(p, core.Options{Trace: true})
		if err != nil {
			t.Fatal(err)
		}
		const op = "loss.loss_parallel_cross_entropy"
		if got := lossAllocs(r.Trace, op, replay.PhaseForward); !slices.Equal(got, tc.forward) {
			t.Errorf("%s: forward allocates %v, want %v", tc.name, got, tc.forward)
		}
		if got := lossAllocs(r.Trace, op, replay.PhaseBackward); !slices.Equal(got, tc.back) {
			t.Errorf("%s: backward allocates %v, want %v", tc.name, got, tc.back)
		}
	}
}

// TestLossParallelModes: Megatron's in-place cross-entropy is the default
// with tp; "torch" holds more at the loss's backward; neither changes a
// plan without tp; an unknown mode is refused.
func TestLossParallelModes(t *testing.T) {
	m := testmodels.Llama(512, 2, 8, 2, 1376, 32000, "flash")
	peak := func(par core.Parallelism) int64 {
		p := testmodels.LlamaPlan(m, 2, 1024, "bf16-mixed", "none", "H100-80GB")
		p.Parallel = par
		return evalPlan(t, p).PeakAllocated
	}
	tp := core.Parallelism{TP: 2, SequenceParallel: true}
	torch := tp
	torch.LossParallel = "torch"
	if a, b := peak(tp), peak(torch); b <= a {
		t.Errorf("tp 2: loss_parallel torch peaks at %d, megatron at %d; want torch higher", b, a)
	}
	one := core.Parallelism{DP: 2}
	oneTorch := one
	oneTorch.LossParallel = "torch"
	if a, b := peak(one), peak(oneTorch); a != b {
		t.Errorf("no tp: loss_parallel changed the peak from %d to %d", a, b)
	}
	bad := core.Parallelism{TP: 2, LossParallel: "dtensor"}
	if err := bad.Validate(); err == nil {
		t.Error(`loss_parallel="dtensor" validated`)
	}
}
