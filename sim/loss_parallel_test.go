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

// tp2LossRun replays, traced, the small Llama of the tests below over
// tp = 2 with sequence parallelism and loss_parallel=mode: each rank's
// logits shard is 2,048 x 16,000.
func tp2LossRun(t *testing.T, mode string) *replay.Report {
	t.Helper()
	m := testmodels.Llama(512, 2, 8, 2, 1376, 32000, "flash")
	p := testmodels.LlamaPlan(m, 2, 1024, "bf16-mixed", "none", "H100-80GB")
	p.Parallel = core.Parallelism{TP: 2, SequenceParallel: true, LossParallel: mode}
	r, err := Evaluate(p, core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestMegatronFusedCEByHand counts Megatron's loss under
// --cross-entropy-loss-fusion (core/fused_ce.go) against the eager one on
// the small Llama over tp = 2 above: the logits shard is 2,048 x 16,000,
// E32 = 131,072,000 bytes in fp32, E16 = 65,536,000 in bf16. Both
// forwards allocate the fp32 softmax (E32) and the row-sized mask (2,048
// B), shifted targets (8 B a row) and loss (4 B); the eager backward
// allocates the bf16 gradient (E16), the fused one first the clone of the
// softmax (E32, Inductor's index_put), then the gradient: the loss's
// backward peaks E32 higher.
func TestMegatronFusedCEByHand(t *testing.T) {
	const e32, e16 = 131_072_000, 65_536_000
	fwd := []int64{e32, 2048, 8 * 2048, 4}
	for _, c := range []struct {
		mode, op string
		back     []int64
	}{
		{"megatron", "loss.vocab_parallel_cross_entropy", []int64{e16}},
		{core.MegatronFusedCE, "loss.fused_vocab_parallel_cross_entropy", []int64{e32, e16}},
	} {
		r := tp2LossRun(t, c.mode)
		if got := lossAllocs(r.Trace, c.op, replay.PhaseForward); !slices.Equal(got, fwd) {
			t.Errorf("%s: forward allocates %v, want %v", c.mode, got, fwd)
		}
		if got := lossAllocs(r.Trace, c.op, replay.PhaseBackward); !slices.Equal(got, c.back) {
			t.Errorf("%s: backward allocates %v, want %v", c.mode, got, c.back)
		}
	}
}

// TestTEParallelCEByHand counts Transformer Engine's parallel_cross_entropy
// (loss_parallel="te", core/fused_ce.go) on the same shard: its forward
// allocates m_d_X_y (3 fp32 a row: 24,576 B), its all-gather over tp 2
// (49,152 B) and the loss (4 B a row: 8,192 B), never a copy of the
// logits; the backward's gradient is the saved logits themselves (E16,
// released and taken again). The loss's peak is E32 + E16 under eager
// Megatron's (the fp32 softmax, then the gradient beside it), E16 here,
// so the step's peak falls by up to E32.
func TestTEParallelCEByHand(t *testing.T) {
	const e16 = 65_536_000
	r := tp2LossRun(t, core.TEParallelCE)
	const op = "loss.te_parallel_cross_entropy"
	if got, want := lossAllocs(r.Trace, op, replay.PhaseForward), []int64{24576, 49152, 8192}; !slices.Equal(got, want) {
		t.Errorf("forward allocates %v, want %v", got, want)
	}
	if got, want := lossAllocs(r.Trace, op, replay.PhaseBackward), []int64{e16}; !slices.Equal(got, want) {
		t.Errorf("backward allocates %v, want %v", got, want)
	}
	if eager := tp2LossRun(t, "megatron"); r.PeakAllocated >= eager.PeakAllocated {
		t.Errorf("peak %d under Transformer Engine's loss, %d under Megatron's eager one: want lower", r.PeakAllocated, eager.PeakAllocated)
	}
}

// TestMegatronFusedCERefused: the fused loss is Megatron's: refused where
// memsh does not lower Megatron's vocabulary-parallel loss.
func TestMegatronFusedCERefused(t *testing.T) {
	m := testmodels.Llama(512, 2, 8, 2, 1376, 32000, "flash")
	for _, c := range []struct {
		name string
		prec string
		par  core.Parallelism
		ok   bool
	}{
		{"tp 2", "bf16-mixed", core.Parallelism{TP: 2}, true},
		{"dp 2, megatron precision", "megatron", core.Parallelism{DP: 2}, true},
		{"dp 2", "bf16-mixed", core.Parallelism{DP: 2}, false},
		{"one GPU, megatron precision", "megatron", core.Parallelism{}, false},
	} {
		for _, mode := range []string{core.MegatronFusedCE, core.TEParallelCE} {
			p := testmodels.LlamaPlan(m, 2, 1024, c.prec, "none", "H100-80GB")
			c.par.LossParallel = mode
			p.Parallel = c.par
			_, err := Evaluate(p, core.Options{})
			if (err == nil) != c.ok {
				t.Errorf("%s, %s: error %v, want ok=%v", c.name, mode, err, c.ok)
			}
		}
	}
}

// TestMegatronFusedCEMatchesInductor holds the fused loss's lowering to
// what Inductor generated for Megatron-Core's four functions
// (tools/oracle/fused_ce_inductor.py on the CPU, torch 2.6.0 and 2.15;
// sim/testdata/fused_ce_inductor.jsonl): the tensors of the logits' size
// each allocates. The three forward functions allocate the fp32 copy
// only (the in-place steps write into it); the backward, a clone of the
// softmax in fp32 and the bf16 gradient. The replay's allocations of the
// logits' size at the loss must be those, in that order.
func TestMegatronFusedCEMatchesInductor(t *testing.T) {
	want := map[string][2][]string{} // torch version: forward, backward buffers' dtypes
	for _, l := range readJSONL[struct {
		Function string   `json:"function"`
		Torch    string   `json:"torch"`
		Buffers  []string `json:"logit_sized_buffers"`
	}](t, "fused_ce_inductor.jsonl") {
		w := want[l.Torch]
		if l.Function == "calculate_gradients" {
			w[1] = append(w[1], l.Buffers...)
		} else {
			w[0] = append(w[0], l.Buffers...)
		}
		want[l.Torch] = w
	}
	if len(want) < 2 {
		t.Fatalf("%d torch versions in the fixture, want 2", len(want))
	}
	const e32, e16 = 131_072_000, 65_536_000 // the shard of TestMegatronFusedCEByHand
	r := tp2LossRun(t, core.MegatronFusedCE)
	dtypes := func(phase replay.Phase) []string {
		var out []string
		for _, b := range lossAllocs(r.Trace, "loss.fused_vocab_parallel_cross_entropy", phase) {
			switch b {
			case e32:
				out = append(out, "float32")
			case e16:
				out = append(out, "bfloat16")
			}
		}
		return out
	}
	fwd, bwd := dtypes(replay.PhaseForward), dtypes(replay.PhaseBackward)
	for v, w := range want {
		if !slices.Equal(fwd, w[0]) || !slices.Equal(bwd, w[1]) {
			t.Errorf("torch %s: Inductor allocates %v forward, %v backward; the replay %v and %v", v, w[0], w[1], fwd, bwd)
		}
	}
}
