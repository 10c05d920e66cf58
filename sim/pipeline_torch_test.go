package sim

import (
	"slices"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// traceAllocs lists the bytes op allocates, in order.
func traceAllocs(tr *replay.Trace, op string) []int64 {
	var out []int64
	for _, e := range tr.Events {
		if e.Action == "alloc" && e.Op == op {
			out = append(out, e.Size)
		}
	}
	return out
}

// freedIn reports whether the tensor first allocated as name is freed in
// one of phases.
func freedIn(tr *replay.Trace, name string, phases ...replay.Phase) bool {
	addr := int64(-1)
	for _, e := range tr.Events {
		switch {
		case addr < 0 && e.Action == "alloc" && e.Tensor == name:
			addr = e.Addr
		case addr >= 0 && e.Action != "alloc" && e.Addr == addr && e.Tensor == name:
			return slices.Contains(phases, e.Phase)
		}
	}
	return false
}

// TestTorchPipelining counts what torch.distributed.pipelining keeps
// (pp_runtime="torch", sim/core/pipeline_torch.go) by hand: a small Llama
// (4 blocks of width 512, a 32,000-word vocabulary) on pp = 2 with 4
// micro-batches of 2 x 1,024 tokens in bf16, so an activation between the
// stages is H = 2 x 1,024 x 512 x 2 = 2,097,152 bytes and the logits
// L = 2 x 1,024 x 32,000 x 2 = 131,072,000 bytes.
//
//   - stage 0 holds 2 micro-batches in flight: before the step it keeps
//     the outputs of the 2 done ones and the gradient receive buffers of
//     all 4 (2 idle, 2 for the copies in flight): six H;
//   - stage 1, the last, holds one: the receive buffers of the 3 others,
//     their input gradients and their logits (3 H, 3 H, 3 L); after the
//     backward step() concatenates the 4 micro-batches' logits (4 L);
//   - the last stage's logits, its received activation and that
//     activation's gradient live until the step ends; Megatron's runtime
//     frees the logits within the backward.
func TestTorchPipelining(t *testing.T) {
	const h, l = 2_097_152, 131_072_000
	m := testmodels.Llama(512, 4, 8, 2, 1376, 32000, "flash")
	run := func(runtime string) *replay.Report {
		p := testmodels.LlamaPlan(m, 2, 1024, "bf16", "none", "H100-80GB")
		p.GradAccum = 4
		p.Parallel = core.Parallelism{PP: 2, PPRuntime: runtime}
		r, err := Evaluate(p, core.Options{Trace: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Ranks) != 2 {
			t.Fatalf("%d stage reports, want 2", len(r.Ranks))
		}
		return r
	}
	const setup, merge = "pipeline receive buffers", "pipeline step(): merged outputs"
	torch := run("torch")
	s0, s1 := torch.Ranks[0].Trace, torch.Ranks[1].Trace
	if got, want := traceAllocs(s0, setup), []int64{h, h, h, h, h, h}; !slices.Equal(got, want) {
		t.Errorf("stage 0 keeps %v before the step, want %v", got, want)
	}
	if got, want := traceAllocs(s1, setup), []int64{h, h, h, h, h, h, l, l, l}; !slices.Equal(got, want) {
		t.Errorf("stage 1 keeps %v before the step, want %v", got, want)
	}
	if got := traceAllocs(s1, merge); !slices.Equal(got, []int64{4 * l}) {
		t.Errorf("stage 1 merges %v, want one %d", got, 4*l)
	}
	if len(traceAllocs(s0, merge)) != 0 {
		t.Error("stage 0 merges outputs; only the last stage returns them")
	}
	const logits, received = "stage1.mb0.lm_head.out", "stage1.mb0.received"
	for _, name := range []string{logits, received, "grad of " + received} {
		if !slices.ContainsFunc(s1.Events, func(e replay.TraceEvent) bool { return e.Action == "alloc" && e.Tensor == name }) {
			t.Fatalf("stage 1 allocates no %s", name)
		}
		if freedIn(s1, name, replay.PhaseForward, replay.PhaseBackward) {
			t.Errorf("torch runtime: %s freed within the forward or backward; output_chunks and the receive buffer keep it", name)
		}
	}
	megatron := run("")
	for i, rk := range megatron.Ranks {
		if n := len(traceAllocs(rk.Trace, setup)) + len(traceAllocs(rk.Trace, merge)); n != 0 {
			t.Errorf("megatron runtime: stage %d allocates %d pipeline buffers", i, n)
		}
	}
	if !freedIn(megatron.Ranks[1].Trace, logits, replay.PhaseForward, replay.PhaseBackward) {
		t.Errorf("megatron runtime: %s not freed within the step", logits)
	}
	for i := range torch.Ranks {
		if a, b := megatron.Ranks[i].PeakAllocated, torch.Ranks[i].PeakAllocated; b <= a {
			t.Errorf("stage %d: torch runtime peaks at %d, megatron at %d; want torch higher", i, b, a)
		}
	}
	bad := core.Parallelism{PP: 2, PPRuntime: "deepspeed"}
	if err := bad.Validate(); err == nil {
		t.Error(`pp_runtime="deepspeed" validated`)
	}
}
