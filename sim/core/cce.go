package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// CCELoss is the Plan.FusedLoss spelling of Apple's Cut Cross-Entropy
// (train(loss_chunks="cce")): Axolotl's CutCrossEntropyPlugin patches a
// causal LM's forward to hand the final norm's output and lm_head's weight
// to linear_cross_entropy instead of computing logits.
const CCELoss = "cce"

// CCEOp is the loss's op kind (timing/cce.go prices it by it).
const CCEOp = "linear_cross_entropy"

// Cut Cross-Entropy as Axolotl runs it: its fork of apple/ml-cross-entropy
// at 5f0c7a7 (the commit axolotl's integrations/cut_cross_entropy pins at
// 067b021c8), impl "cce" (the Triton kernels), read from
// cut_cross_entropy/cce.py, cce_lse_forward.py, cce_backward.py,
// indexed_dot.py, utils.py and transformers/utils.py (apply_lce, with
// shift=True, filter_eps "auto", no fp32 accumulation: cce_patch's
// defaults, which the plugin keeps):
//
//   - no logits tensor, forward or backward: the kernels compute them
//     block by block in registers;
//   - the forward builds the valid targets' flat indices from the labels
//     (utils.py _build_flat_valids: labels[..., 1:] != -100, a bool tensor;
//     nonzero(), int64 [n, 2]; .to(int32); .sum(1), int64 [n], saved),
//     then allocates lse (fp32 [n], saved), the forward kernel's locks
//     (uint32 [n/128]), logit_avg (fp32 [V], saved: filter_eps is set) and
//     neg_dot (fp32 [n], indexed_dot.py), to which lse is added in place;
//     the loss is its sum (0-dim fp32). n is the labels' count less one a
//     row: memsh counts every label valid, as it does for the other losses;
//   - it saves e (the head's input as it is: the final norm's output,
//     sliced by logits_to_keep 0, which PyTorch's indexing returns as is),
//     c (lm_head's weight), lse, the labels, the valid indices and
//     logit_avg: no copy of e or c;
//   - the backward sorts the vocabulary by logit_avg (sort_logit_avg,
//     torch.compile'd argsort: aten.sort's fp32 values and int64 indices,
//     then an int32 copy), allocates de = zeros_like(e) (e's dtype and
//     shape: every token) and, when lm_head trains, dc = zeros_like(c)
//     (the weight's dtype), with int32 locks for each ([n/128, D/64] and
//     [V/128, D/64]), and returns them as e's and c's gradients;
//   - its kernels take only bf16 or fp16 e and c (cce_backward_kernel
//     asserts it), so lm_head's weight must be stored in 16 bits: Axolotl
//     with bf16 loads the model in bfloat16.
//
// Its backward recomputes the logits and runs the two gradient GEMMs, but
// skips the vocabulary blocks whose softmax stays below filter_eps
// (bf16's eps / 32) for every token of the block (gradient filtering):
// how many it skips depends on the trained model's outputs, which memsh
// does not know, so timing/cce.go prices the dense backward, an upper
// bound.

// validateCCE checks a plan asking for Cut Cross-Entropy.
func (p *Plan) validateCCE() error {
	const what = `loss_chunks="cce"`
	if err := p.fusedHeadRefusal(); err != nil {
		return err
	}
	switch {
	case p.Precision.Params != units.BF16 && p.Precision.Params != units.FP16:
		return &units.Error{Path: "train", Msg: fmt.Sprintf(what+"'s kernels take a bf16 or fp16 lm_head weight (cce_backward_kernel asserts it); precision %q stores it in %s",
			p.Precision.Name, p.Precision.Params), Hint: `precision="bf16" (Axolotl loads the model in bfloat16 with bf16: true)`}
	case p.Parallel.Norm().TP > 1:
		return &units.Error{Path: "train", Msg: what + " with tensor parallelism (its vocabulary-parallel options over a DTensor lm_head) is not modelled",
			Hint: "drop tp, or drop loss_chunks"}
	}
	return nil
}

// cceHead reports whether the plan runs the model's head and loss as Cut
// Cross-Entropy.
func (ft *Finetune) cceHead(m *Model) bool {
	return ft != nil && ft.cce && m.Vocab > 0 && (m.Loss == "" || m.Loss == "cross_entropy")
}

// cceModelLoss lowers the model's lm_head and loss as Cut Cross-Entropy on
// x ([.., tokens, H]) and returns the loss.
func (b *Builder) cceModelLoss(m *Model, x Value) Value {
	d := b.Last(x)
	tokens := Rows(b.Shape(x))
	head, closeLoss := b.openFusedHead(m, x, d)
	defer closeLoss()
	ls := b.Shape(head.labels)
	rows := Numel(ls[:len(ls)-1])
	n := tokens - rows // shift=True: a row's last token has no target
	vocab := m.Vocab
	// _build_flat_valids, before the kernel: the mask, nonzero's int64
	// [n, 2] and its int32 copy, dropped once the indices are summed (held
	// together here: at most 9 bytes a token more than PyTorch's peak).
	iv := b.AddOp("nonzero", "valids", []Value{head.labels})
	b.Op(iv).NoGradB = true
	b.Op(iv).Syncs = 1 // nonzero's count, read on the host
	valids := b.Out(iv, "valids", []int64{n}, units.INT64, "the valid targets' flat indices (_build_flat_valids: nonzero().to(int32).sum(1)), saved")
	mask, nz, nz32 := units.BOOL.Bytes(n), units.INT64.Bytes(2*n), units.INT32.Bytes(2*n)
	b.Op(iv).WorkF = mask + nz + nz32
	b.Op(iv).Work = &WorkTensors{F: []int64{mask, nz, nz32}}
	in := []Value{x, head.labels, valids}
	if head.wv != NoValue {
		in = append(in, head.wv)
	}
	i := b.AddOp(CCEOp, CCEOp, in, head.params...)
	needs := !b.Eval && (b.Grad(x) || b.Trainable(head.w)) // the kernel's needs_grad
	out := func(name string, shape []int64, dt units.DType, why string) Value {
		v := b.Out(i, name, shape, dt, why)
		b.Val(v).Grad = false
		return v
	}
	lse := out("lse", []int64{n}, units.FP32, "the log-sum-exp of each token's logits (cce_lse_forward_kernel), saved")
	out("lse_locks", []int64{divUp(n, 128)}, units.INT32, "the forward kernel's locks (uint32)")
	var avg Value = NoValue
	if needs {
		avg = out("logit_avg", []int64{vocab}, units.FP32, "each vocabulary entry's mean logit, for the backward's ordering (filter_eps is set), saved")
	}
	out("neg_dot", []int64{n}, units.FP32, "the target logits (indexed_neg_dot_forward_kernel), lse added in place: the loss per token")
	loss := b.Out(i, "loss", nil, units.FP32, "loss (the per-token losses' sum)")
	op := b.Op(i)
	// The forward's one pass: the logits' GEMM; the backward (timing/cce.go)
	// recomputes it beside the two gradient GEMMs.
	op.Flops = 2 * float64(n) * float64(d) * float64(vocab)
	if needs {
		// The backward's ordering of the vocabulary and its locks.
		locks := units.INT32.Bytes(divUp(n, 128) * divUp(d, 64))
		work := &WorkTensors{}
		work.B = []int64{units.FP32.Bytes(vocab), units.INT64.Bytes(vocab), units.INT32.Bytes(vocab), locks}
		if b.Trainable(head.w) {
			work.B = append(work.B, units.INT32.Bytes(divUp(vocab, 128)*divUp(d, 64)))
		}
		for _, w := range work.B {
			op.WorkB += w
		}
		op.Work = work
	}
	saved := []Value{x, head.labels, valids, lse}
	if avg != NoValue {
		saved = append(saved, avg)
	}
	b.Save(i, saved...)
	return loss
}
