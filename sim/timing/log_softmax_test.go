package timing

import (
	"math"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
)

// TestCrossEntropyBytesByHand counts the loss's passes by hand on an
// A100-80GB, in units of the logits' bytes X (rows of fp32 or bf16
// logits) at the stream rate, plus the labels' bytes L:
//
//   - eager cross_entropy over rows wider than 48 KiB (32,000 fp32
//     logits, 128 KB): log_softmax reads X three times and writes the
//     log-probabilities once, nll_loss reads L (4X + L); backward,
//     nll_loss_backward's zero fill and target write, log_softmax_backward's
//     two reads of the gradient, one of the output and the logits'
//     gradient written (5X + L);
//   - a chunked loss's chunk (core.ChunkCE: [batch, tokens, vocab] logits,
//     [rows, vocab] log-probabilities) counts the same;
//   - rows of 1,000 fp32 logits (4 KB) fit the persistent kernels: one
//     read forward (2X + L) and one of the gradient backward (4X + L);
//   - flash-attn's fused loss reads bf16 logits twice and writes a loss
//     and a log-sum-exp a row, and its backward reads them once and
//     writes their gradient (2X each way, and a row's bytes twice);
//   - compiled dispatch keeps the stream price (not priced here).
func TestCrossEntropyBytesByHand(t *testing.T) {
	a100, err := hw.LookupDevice("A100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	s := streamRate(&a100)
	const rows = 65536
	for _, c := range []struct {
		name           string
		logits, lsm    []int64
		dtype          units.DType
		loss           string
		dispatch       Dispatch
		ok             bool
		fwdX, bwdX     float64 // passes over the logits' bytes
		fwdRow, bwdRow float64 // passes over a row's labels (and losses)
	}{
		{"eager, wide rows", []int64{rows, 32000}, []int64{rows, 32000}, units.FP32, "cross_entropy", DispatchEager, true, 4, 5, 1, 1},
		{"chunked loss's chunk", []int64{8, rows / 8, 32000}, []int64{rows, 32000}, units.FP32, "cross_entropy", DispatchEager, true, 4, 5, 1, 1},
		{"eager, persistent rows", []int64{rows * 32, 1000}, []int64{rows * 32, 1000}, units.FP32, "cross_entropy", DispatchEager, true, 2, 4, 1, 1},
		{"compiled", []int64{rows, 32000}, []int64{rows, 32000}, units.FP32, "cross_entropy", DispatchCompiled, false, 0, 0, 0, 0},
		{"flash-attn's fused loss", []int64{rows, 32000}, nil, units.BF16, core.FlashCE, DispatchCompiled, true, 2, 2, 2, 2},
	} {
		n := core.Numel(c.logits)
		r := n / c.logits[len(c.logits)-1]
		x := float64(n) * float64(c.dtype.Bytes(1))
		lab := 8 * float64(r)
		vals := []core.ValueInfo{
			{Name: "logits", Shape: c.logits, Dtype: c.dtype, Bytes: int64(x), Grad: true, Producer: -1},
			{Name: "labels", Shape: []int64{r}, Dtype: units.INT64, Bytes: int64(lab), Producer: -1},
		}
		// the log-probabilities (or row losses), then the loss, which requires grad: autograd records the op
		op := core.OpInfo{Kind: "cross_entropy", Name: "loss." + c.loss, In: []core.Value{0, 1}, Out: []core.Value{2, 3}} // scoped as lowered
		row := lab
		if c.lsm != nil {
			vals = append(vals, core.ValueInfo{Name: "log_probs", Shape: c.lsm, Dtype: c.dtype, Bytes: int64(x), Producer: 0})
			op.Bytes = x
		} else {
			vals = append(vals, core.ValueInfo{Name: "losses", Shape: []int64{r}, Dtype: units.FP32, Bytes: 4 * r, Producer: 0})
			op.Bytes = float64(4 * r)
			row = lab + float64(4*r) // labels == ignore_index and masked_fill_ on the row losses
		}
		vals = append(vals, core.ValueInfo{Name: "loss", Dtype: units.FP32, Bytes: 4, Grad: true, Producer: 0})
		pr := &pricer{prog: &core.Program{Values: vals}, d: a100, dispatch: c.dispatch}
		got, ok := pr.crossEntropy(&op)
		if ok != c.ok {
			t.Fatalf("%s: priced %v, want %v", c.name, ok, c.ok)
		}
		if !ok {
			continue
		}
		fwd, bwd := (c.fwdX*x+c.fwdRow*row)/s, (c.bwdX*x+c.bwdRow*row)/s
		if math.Abs(got.Fwd-fwd) > 1e-9*fwd || math.Abs(got.Bwd-bwd) > 1e-9*bwd {
			t.Errorf("%s: forward %.3f ms, backward %.3f ms; want %.3f and %.3f (%g and %g passes over the logits)",
				c.name, 1e3*got.Fwd, 1e3*got.Bwd, 1e3*fwd, 1e3*bwd, c.fwdX, c.bwdX)
		}
	}
}

// TestVocabParallelCEBytesByHand counts the vocabulary-parallel losses'
// passes over a rank's shard of E = 65,536 x 16,000 logits by hand (the
// per-element bytes in vocabParallelCE's comment), on an A100-80GB at the
// stream rate, plus their row-sized kernels at the 2 µs floor:
//
//   - Megatron's from bf16: forward 6 (.float()) + 4 + 8 + 8 + 4 + 8 = 38
//     B an element and eleven small kernels; backward 8 (mul_) + 6 (the
//     cast back) = 14 and four small kernels. From fp32 no casts: 32 and 8.
//   - Megatron's under --cross-entropy-loss-fusion from bf16: forward 6
//     (the fp32 copy and the max in one pass) + 8 (sub, exp and the sums)
//   - 8 (the division) = 22 B an element and three small kernels;
//     backward 8 (the clone) + 4 + 4 + 2 (times grad_output, written back
//     and as bf16) = 18 and one; from fp32 the forward reads 4 for the max
//     (20); from fp16 autograd casts the bf16 gradient again (+4: 22).
//   - Transformer Engine's parallel_cross_entropy from bf16: forward 2 +
//     2 + 2 = 6 and two small kernels, backward 2 + 2 = 4; from fp32 12
//     and 8.
//   - torch's loss_parallel from bf16: forward 6 + 4 + 8 + 8 + 4 + 8 + 6 =
//     44 and five small kernels; backward 2 + 4 + 6 + 4 = 16 and one.
//   - compiled dispatch is not priced here.
func TestVocabParallelCEBytesByHand(t *testing.T) {
	a100, err := hw.LookupDevice("A100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	s := streamRate(&a100)
	const e = 65536 * 16000
	for _, c := range []struct {
		name               string
		op                 string
		dtype              units.DType
		dispatch           Dispatch
		fwdB, bwdB         float64 // bytes an element
		fwdSmall, bwdSmall float64 // row-sized kernels
	}{
		{"Megatron, bf16", "vocab_parallel_cross_entropy", units.BF16, DispatchFused, 38, 14, 11, 4},
		{"Megatron, fp32", "vocab_parallel_cross_entropy", units.FP32, DispatchEager, 32, 8, 11, 4},
		{"Transformer Engine, bf16", "te_parallel_cross_entropy", units.BF16, DispatchFused, 6, 4, 2, 0},
		{"Transformer Engine, fp32", "te_parallel_cross_entropy", units.FP32, DispatchEager, 12, 8, 2, 0},
		{"Megatron fused, bf16", "fused_vocab_parallel_cross_entropy", units.BF16, DispatchFused, 22, 18, 3, 1},
		{"Megatron fused, fp32", "fused_vocab_parallel_cross_entropy", units.FP32, DispatchEager, 20, 18, 3, 1},
		{"Megatron fused, fp16", "fused_vocab_parallel_cross_entropy", units.FP16, DispatchEager, 22, 22, 3, 1},
		{"loss_parallel, bf16", "loss_parallel_cross_entropy", units.BF16, DispatchEager, 44, 16, 5, 1},
		{"compiled", "loss_parallel_cross_entropy", units.BF16, DispatchCompiled, 0, 0, 0, 0},
	} {
		vals := []core.ValueInfo{
			{Name: "logits", Shape: []int64{65536, 16000}, Dtype: c.dtype, Bytes: c.dtype.Bytes(e), Grad: true, Producer: -1},
			{Name: "loss", Dtype: units.FP32, Bytes: 4, Grad: true, Producer: 0}, // requires grad: autograd records the op
		}
		op := core.OpInfo{Kind: "cross_entropy", Name: "loss." + c.op, In: []core.Value{0}, Out: []core.Value{1}} // scoped as lowered
		pr := &pricer{prog: &core.Program{Values: vals}, d: a100, dispatch: c.dispatch}
		got, ok := pr.vocabParallelCE(&op)
		if ok != (c.fwdB > 0) {
			t.Fatalf("%s: priced %v", c.name, ok)
		}
		if !ok {
			continue
		}
		fwd, bwd := c.fwdB*e/s+c.fwdSmall*kernelFloor, c.bwdB*e/s+c.bwdSmall*kernelFloor
		if math.Abs(got.Fwd-fwd) > 1e-9*fwd || math.Abs(got.Bwd-bwd) > 1e-9*bwd {
			t.Errorf("%s: forward %.3f ms, backward %.3f ms; want %.3f and %.3f (%g and %g B an element)",
				c.name, 1e3*got.Fwd, 1e3*got.Bwd, 1e3*fwd, 1e3*bwd, c.fwdB, c.bwdB)
		}
	}
}
