package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// chunkedLossPlan is the small Llama of TestLigerFusedLinearCE (hidden 512, a
// 32,000-word vocabulary, 2 x 1,024 tokens: T = 2,048) with loss fl.
func chunkedLossPlan(fl string, chunks int64) *core.Plan {
	m := testmodels.Llama(512, 2, 8, 2, 1376, 32000, "flash")
	p := testmodels.LlamaPlan(m, 2, 1024, "bf16", "none", "H100-80GB")
	p.FusedLoss, p.LossChunks = fl, chunks
	return p
}

// TestTitanChunkedLoss counts ChunkedLossWrapper (sim/core/titan_loss.go,
// torchtitan/components/loss.py at b5bcd76c6) by hand, 8 chunks of n =
// 256 tokens, bf16:
//
//   - GradAccumulator's buffer, T x D fp32: 4,194,304 (l.431, l.640);
//   - a chunk's logits n x V bf16: 16,384,000 (held by the loop's variable
//     until the next chunk's are assigned, l.670); pred.float(): 32,768,000
//     (l.57), dropped after log_softmax, which is saved: 32,768,000; the
//     chunk's loss, 4;
//   - chunk_loss.backward() (l.683): the nll gradient (workspace) and
//     log_softmax's gradient, 32,768,000 each, then the saved log_softmax
//     goes; ToCopyBackward's bf16 gradient 16,384,000; lm_head's backward:
//     h_chunk.grad n x D bf16 262,144 and lm_head's gradient V x D bf16
//     32,768,000 (the first chunk), a V x D temporary added in place (the
//     others);
//   - grad_accumulator.add: .to(fp32) n x D, 524,288 (l.466);
//   - after the loop: .to(bf16) T x D 2,097,152 (l.707), the fp32 buffer
//     and the last logits go; the loss's forward drops the hidden states
//     (trainer.py l.795 del pred) and the chunk losses;
//   - the backward hands the saved gradients on: the hidden states' and
//     lm_head's gradients of the same sizes take their place.
func TestTitanChunkedLoss(t *testing.T) {
	const l16, l32 = 16_384_000, 32_768_000
	r, err := Evaluate(chunkedLossPlan(core.TitanLoss, 8), core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	checkOpEvents(t, r.Trace, []opEventCase{
		{"loss.grad_accumulator", replay.PhaseForward, []int64{4_194_304}},
		{"loss.logits_0", replay.PhaseForward, []int64{l16}},
		{"loss.to_fp32_0", replay.PhaseForward, []int64{l32}},
		{"loss.cross_entropy_0", replay.PhaseForward, []int64{l32, 4, -l32}},
		{"loss.cross_entropy_backward_0", replay.PhaseForward, []int64{l32, l32, -l32, -l32}},
		{"loss.to_copy_backward_0", replay.PhaseForward, []int64{l16, -l32}},
		{"loss.lm_head_backward_0", replay.PhaseForward, []int64{262_144, l32, -l16}},
		{"loss.grad_accumulate_0", replay.PhaseForward, []int64{524_288, -524_288, -262_144}},
		{"loss.logits_1", replay.PhaseForward, []int64{l16, -l16}},
		{"loss.lm_head_backward_1", replay.PhaseForward, []int64{262_144, l32, -l32, -l16}},
		{"loss.accumulated_grad", replay.PhaseForward, []int64{2_097_152, -4_194_304, -l16}},
		{"loss.chunked_loss", replay.PhaseForward, []int64{4, -2_097_152, -4, -4, -4, -4, -4, -4, -4, -4}},
		{"loss.chunked_loss", replay.PhaseBackward, []int64{-2_097_152, -l32, 2_097_152, l32, -4}},
		{"loss.logits_8", replay.PhaseForward, nil}, // 8 chunks, no ninth
	})
}

// liveFrom sums what the steady step allocates and frees from the first
// event of an op in module "lm_head" or "loss" on: the loss's share of
// the peak, and the op where that share is largest.
func liveFrom(tr *replay.Trace) (peak int64, at string) {
	var run, base int64
	started := false
	for _, e := range tr.SteadyEvents() {
		if !started && (strings.HasPrefix(e.Module, "lm_head") || strings.HasPrefix(e.Module, "loss")) {
			started, base = true, run
		}
		switch e.Action {
		case "alloc":
			run += e.Size
		case "free_completed":
			run -= e.Size
		}
		if started && run-base > peak {
			peak, at = run-base, e.Op
		}
	}
	return peak, at
}

// TestTitanPeakAgainst: what the head and loss add at their peak, over
// what is live when they start, hand-counted for the unchunked
// cross-entropy, Liger's kernel and ChunkedLossWrapper (8 and 16 chunks),
// same model and batch (T x V = 65,536,000 logits):
//
//   - unchunked, at the loss's backward: the saved fp32 log_softmax, the
//     nll gradient and the fp32 logits' gradient, 262,144,000 each, and
//     three 4-byte scalars;
//   - Liger, at chunk 0's weight gradient (TestLigerFusedLinearCE): the
//     setup's 34,908,176, a logits chunk 4,096,000, the V x D product
//     32,768,000 and its fp32 copy 65,536,000;
//   - ChunkedLossWrapper, at the last chunk's cross-entropy backward: the
//     fp32 buffer 4,194,304, lm_head's gradient 32,768,000, the chunk's
//     bf16 logits, log_softmax, the nll gradient and log_softmax's
//     gradient (2 + 4 + 4 + 4 bytes a logit of n x V) and the chunks' losses
//     (4 bytes each).
func TestTitanPeakAgainst(t *testing.T) {
	const nv8 = 256 * 32000
	const nv16 = 128 * 32000
	for _, tc := range []struct {
		fl     string
		chunks int64
		want   int64
		at     string
	}{
		{"", 1, 3*262_144_000 + 12, "loss.cross_entropy"},
		{"liger", 1, 34_908_176 + 4_096_000 + 32_768_000 + 65_536_000, "loss.grad_weight_0"},
		{core.TitanLoss, 8, 4_194_304 + 32_768_000 + 14*nv8 + 8*4, "loss.cross_entropy_backward_7"},
		{core.TitanLoss, 16, 4_194_304 + 32_768_000 + 14*nv16 + 16*4, "loss.cross_entropy_backward_15"},
	} {
		r, err := Evaluate(chunkedLossPlan(tc.fl, tc.chunks), core.Options{Trace: true})
		if err != nil {
			t.Fatal(err)
		}
		if got, at := liveFrom(r.Trace); got != tc.want || at != tc.at {
			t.Errorf("%q %d: the loss adds %d at %s, want %d at %s", tc.fl, tc.chunks, got, at, tc.want, tc.at)
		}
	}
}

// TestTitanFrozenHead: a frozen lm_head gets no gradient and the later
// chunks add none; the input's gradient buffer stays.
func TestTitanFrozenHead(t *testing.T) {
	p := chunkedLossPlan(core.TitanLoss, 8)
	p.Freeze = []string{"lm_head"}
	r, err := Evaluate(p, core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	for op, want := range map[string][]int64{
		"loss.lm_head_backward_0": {262_144, -16_384_000},
		"loss.lm_head_backward_1": {262_144, -16_384_000},
		"loss.grad_accumulator":   {4_194_304},
	} {
		if got := opEvents(r.Trace, op, replay.PhaseForward); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", op, got, want)
		}
	}
}

// TestTitanRefuses: what ChunkedLossWrapper or memsh refuses, by message.
func TestTitanRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chunks int64
		edit   func(*core.Plan)
		want   string
	}{
		{"tokens not divisible", 3, nil, "2048 tokens a micro-batch do not split in 3 equal chunks"},
		{"no chunks", 0, nil, "num_chunks must be positive"},
		{"quantized head", 8, func(p *core.Plan) { p.Quant, p.QuantLMHead, p.Freeze = "nf4", true, []string{"all"} }, "does not combine with quant_lm_head"},
	} {
		p := chunkedLossPlan(core.TitanLoss, tc.chunks)
		if tc.edit != nil {
			tc.edit(p)
		}
		_, err := Evaluate(p, core.Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestTitanChunkedLossMixed: under bf16-mixed the final norm's output is
// fp32 (TestLigerFusedLinearCE), so autocast casts each chunk to bf16 for
// its matmul (n x D, 262,144), which the matmul saves for the chunk's
// backward; h_chunk.grad is fp32 (524,288) and needs no .to(fp32); the
// fp32 weight's gradient is V x D x 4 = 65,536,000; the accumulated
// gradient .to(fp32) is a copy still (4,194,304).
func TestTitanChunkedLossMixed(t *testing.T) {
	const l16 = 16_384_000
	p := chunkedLossPlan(core.TitanLoss, 8)
	p.Precision = testmodels.LlamaPlan(p.Model, 2, 1024, "bf16-mixed", "none", "H100-80GB").Precision
	r, err := Evaluate(p, core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		op   string
		want []int64
	}{
		{"loss.grad_accumulator", []int64{4_194_304}},
		{"loss.logits_0", []int64{l16, 262_144}},
		{"loss.lm_head_backward_0", []int64{524_288, 65_536_000, -l16, -262_144}},
		{"loss.lm_head_backward_1", []int64{524_288, 65_536_000, -65_536_000, -l16, -262_144}},
		{"loss.grad_accumulate_0", []int64{-524_288}},
		{"loss.accumulated_grad", []int64{4_194_304, -4_194_304, -l16}},
	} {
		if got := opEvents(r.Trace, tc.op, replay.PhaseForward); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.op, got, tc.want)
		}
	}
}
