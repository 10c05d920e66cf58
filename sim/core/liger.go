package core

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// Liger-Kernel's fused linear cross-entropy (LigerFusedLinearCrossEntropy,
// what apply_liger_kernel_to_llama(fused_linear_cross_entropy=True) and
// the Hugging Face Trainer's use_liger_kernel=True put in place of a
// causal LM's lm_head and loss; train(loss_chunks="liger")). Read from
// src/liger_kernel/ops/fused_linear_cross_entropy.py and
// transformers/model/loss_utils.py (linkedin/Liger-Kernel):
//
//   - no logits tensor: the BT tokens run through the head in chunks of
//     next_power_of_2(ceil(BT / ceil(V/H))) rows, so a chunk of logits is
//     about as large as the input;
//   - the gradients are made in the forward: zeros_like(_input) (BT x H,
//     the input's dtype) and zeros_like(weight) (V x H, the weight's
//     dtype; only when the weight needs a gradient) are filled chunk by
//     chunk and saved for backward, which only scales them in place by
//     the loss's incoming gradient (element_mul_kernel) and hands them on:
//     they become the input's gradient and the weight's;
//   - per chunk: the logits (chunk x V, the compute dtype), turned into
//     their own gradient in place by the cross-entropy kernel; the Python
//     variable holding the previous chunk is rebound only after the new
//     chunk's matmul, so two chunks are live at once (three where the
//     gradient is a scaled copy, before 0.5.3); grad_logits @ weight
//     (chunk x H) copied into grad_input; the weight's gradient added by
//     a GEMM whose form is the version's;
//   - loss_1d (BT fp32) and the target mask (BT bool) live through the
//     call; the Hugging Face loss pads the labels with one ignored column
//     and, at a batch over 1, copies them shifted (two int64 tensors of
//     the labels' size; at batch 1 the shifted slice is a view of the
//     padded ones: loss_labels.go).
type LigerCE struct {
	Name     string // train(loss_chunks=...) spelling
	Releases string // the releases it models
	Source   string // the file read, at a commit
	// ScaleCopy: grad_logits_chunk = logits_chunk * alpha, a second chunk
	// (0.4.0 to 0.5.2); later releases scale in the kernel.
	ScaleCopy bool
	// MMFloat: grad_weight += torch.mm(grad_logits.t(), input).float()
	// (0.6.2 on): a V x H product in the compute dtype and its fp32 copy
	// per chunk. Earlier releases add with torch.addmm(out=grad_weight),
	// in place.
	MMFloat bool
	// AddmmOut: an fp32 grad_weight with 16-bit logits takes
	// torch.addmm(out_dtype=torch.float32, out=grad_weight) instead
	// (0.8.1 on, torch >= 2.8, compute capability >= 8.0): in place, the
	// input chunk cast to the logits' dtype first when it differs.
	AddmmOut bool
}

// LigerVersions are the Liger-Kernel releases whose fused linear
// cross-entropy differs in memory, newest first.
var LigerVersions = []LigerCE{
	{Name: "liger", Releases: "0.8.1 and later", Source: "fused_linear_cross_entropy.py at v0.8.2 (000be60)", MMFloat: true, AddmmOut: true},
	{Name: "liger-0.6.2", Releases: "0.6.2 to 0.8.0", Source: "fused_linear_cross_entropy.py at v0.8.0 (c4b16d4)", MMFloat: true},
	{Name: "liger-0.5.3", Releases: "0.5.3 to 0.6.1", Source: "fused_linear_cross_entropy.py at v0.6.0 (66570b1)"},
	{Name: "liger-0.4.0", Releases: "0.4.0 to 0.5.2", Source: "fused_linear_cross_entropy.py at 90fb5e4 (the benchmark data's commit)", ScaleCopy: true},
}

// LookupLiger finds a version by its spelling.
func LookupLiger(name string) (LigerCE, bool) {
	for _, v := range LigerVersions {
		if v.Name == name {
			return v, true
		}
	}
	return LigerCE{}, false
}

// LigerNames lists the spellings, for errors and docs.
func LigerNames() string {
	var names []string
	for _, v := range LigerVersions {
		names = append(names, fmt.Sprintf("%q (%s)", v.Name, v.Releases))
	}
	return strings.Join(names, ", ")
}

// LigerChunkRows is the kernel's chunk size for bt tokens, a hidden size
// h and a vocabulary v: inc_factor = ceil(V/H), chunk_size =
// next_power_of_2(ceil(BT/inc_factor)).
func LigerChunkRows(bt, h, v int64) int64 {
	inc := divUp(v, max(h, 1))
	want := divUp(bt, max(inc, 1))
	n := int64(1)
	for n < want {
		n *= 2
	}
	return n
}

// validateLiger checks a plan asking for Liger's fused linear
// cross-entropy.
func (p *Plan) validateLiger() error {
	if p.FusedLoss == "" {
		return nil
	}
	if p.FusedLoss == TitanLoss {
		return p.validateTitan()
	}
	if p.FusedLoss == CCELoss {
		return p.validateCCE()
	}
	if p.FusedLoss == TRLHead {
		return p.validateTRLHead()
	}
	if _, ok := LookupLiger(p.FusedLoss); !ok {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("unknown loss_chunks %q", p.FusedLoss),
			Hint: "loss_chunks is a number of chunks (torchtune), (\"torchtitan\", n) (ChunkedLossWrapper), \"cce\" (Cut Cross-Entropy), \"trl\" (TRL's fused LM head) or Liger-Kernel's fused linear cross-entropy: " + LigerNames()}
	}
	if err := p.fusedHeadRefusal(); err != nil {
		return err
	}
	if p.Parallel.Norm().TP > 1 {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("loss_chunks=%q does not combine with tensor parallelism: Liger's kernel reads the whole head weight, not a vocabulary shard (no loss parallelism)", p.FusedLoss),
			Hint: "drop tp, or drop loss_chunks and let the vocabulary-parallel cross-entropy run"}
	}
	return nil
}

// ligerHead reports whether the plan runs the model's head and loss as
// Liger's fused linear cross-entropy.
func (ft *Finetune) ligerHead(m *Model) bool {
	return ft != nil && ft.liger != nil && m.Vocab > 0 && (m.Loss == "" || m.Loss == "cross_entropy")
}

// ligerModelLoss lowers the model's lm_head and loss as Liger's fused
// linear cross-entropy on x ([.., tokens, H]) and returns the loss.
func (b *Builder) ligerModelLoss(m *Model, x Value) Value {
	lv := *b.Ft.liger
	h := b.Last(x)
	bt := Rows(b.Shape(x))
	vocab := m.Vocab
	// Under autocast the kernel's matmuls cast the weight inside the
	// Function's forward (no autograd node): autocast's cache keeps one
	// copy until the forward ends, and no gradient flows through it.
	head, closeLoss := b.openFusedHead(m, x, h)
	defer closeLoss()
	w, params, labels, compute, wv := head.w, head.params, head.labels, head.compute, head.wv
	wdt := b.Prec.Params
	inGrad := b.Grad(x) && !b.Eval
	wGrad := inGrad && b.Trainable(w)

	// The call's setup: the gradients, the loss per token, the labels.
	is := b.AddOp("zeros", "fused_linear_cross_entropy_setup", []Value{x, labels}, params...)
	b.Op(is).NoGradB = true
	gi := b.Out(is, "grad_input", []int64{bt, h}, b.Dtype(x), "Liger's grad_input (zeros_like(_input)), filled in the forward and saved: the head input's gradient")
	held := []Value{x, labels, gi}
	gw := NoValue
	if wGrad {
		gw = b.Out(is, "grad_weight", []int64{vocab, h}, wdt, "Liger's grad_weight (zeros_like(weight)), filled in the forward and saved: lm_head's gradient")
		held = append(held, gw)
	}
	loss1d := b.Out(is, "loss_1d", []int64{bt}, units.FP32, "Liger's per-token loss (fp32)")
	mask := b.Out(is, "target_mask", []int64{bt}, units.BOOL, "target != ignore_index")
	ls := b.Shape(labels)
	batch := Numel(ls[:len(ls)-1])
	padded := b.Out(is, "labels_padded", []int64{batch * (ls[len(ls)-1] + 1)}, units.INT64, "labels padded with one ignored column (LigerForCausalLMLoss)")
	shifted := NoValue // labels[..., 1:].contiguous(): a view of the padded labels at batch 1 (loss_labels.go)
	if batch > 1 {
		shifted = b.Out(is, "shift_labels", []int64{bt}, units.INT64, "labels shifted by one token (contiguous copy)")
	}
	held = append(held, loss1d, mask, padded)
	if shifted != NoValue {
		held = append(held, shifted)
	}
	for _, v := range []Value{gi, gw, loss1d, mask, padded, shifted} {
		if v != NoValue {
			b.Val(v).Grad = false
		}
	}
	rows := LigerChunkRows(bt, h, vocab)
	var prev []Value // the previous chunk's tensors, alive until this chunk's logits exist
	for start := int64(0); start < bt; start += rows {
		n := min(rows, bt-start)
		k := Itoa(start / rows)
		in := append([]Value{x}, prev...)
		if wv != NoValue {
			in = append(in, wv)
		}
		il := b.AddOp("matmul", "logits_"+k, in)
		if b.Dtype(x) != compute { // autocast casts the input chunk for the matmul, dropped after it
			b.Val(b.Out(il, "input_chunk_cast."+k, []int64{n, h}, compute, "autocast copy of the input chunk for the logits' matmul")).Grad = false
		}
		lg := b.Out(il, "logits."+k, []int64{n, vocab}, compute, "a chunk of logits inside Liger's kernel (becomes its own gradient in place)")
		b.Val(lg).Grad = false
		op := b.Op(il)
		op.NoGradB = true
		// The chunk's three GEMMs (logits, grad_input, grad_weight), priced
		// as one of three times the depth; the cross-entropy kernel reads
		// and writes the chunk.
		gemms := 2.0
		if wGrad {
			gemms = 3
		}
		if !inGrad {
			gemms = 1
		}
		op.Flops = gemms*2*float64(n)*float64(h)*float64(vocab) + 5*float64(n*vocab)
		op.Bytes += 2 * float64(b.Val(lg).Bytes)
		g := lg
		prev = []Value{lg}
		if lv.ScaleCopy && inGrad {
			ic := b.AddOp("mul", "grad_logits_"+k, []Value{lg})
			g = b.Out(ic, "grad_logits."+k, []int64{n, vocab}, compute, "logits_chunk * alpha, the chunk's gradient (Liger 0.4.0-0.5.2)")
			b.Val(g).Grad = false
			b.Op(ic).NoGradB = true
			prev = append(prev, g)
		}
		if !inGrad {
			continue
		}
		ig := b.AddOp("copy", "grad_input_"+k, []Value{g, gi})
		b.Op(ig).NoGradB = true
		t := b.Out(ig, "grad_input_chunk."+k, []int64{n, h}, compute, "grad_logits @ weight, copied into grad_input")
		b.Val(t).Grad = false
		if wGrad {
			b.ligerWeightGrad(lv, k, g, gw, x, n, h, vocab, compute)
		}
	}
	il := b.AddOp("fused_linear_cross_entropy", "fused_linear_cross_entropy", append(held, prev...), params...)
	loss := b.Out(il, "loss", nil, units.FP32, "loss (torch.sum(loss_1d))")
	b.Save(il, gi, gw)
	b.Op(il).GradsInForward = true
	return loss
}

// ligerWeightGrad adds chunk k's part of lm_head's gradient into gw.
func (b *Builder) ligerWeightGrad(lv LigerCE, k string, g, gw, x Value, n, h, vocab int64, compute units.DType) {
	i := b.AddOp("copy", "grad_weight_"+k, []Value{g, gw})
	b.Op(i).NoGradB = true
	out := func(name string, shape []int64, dt units.DType, why string) {
		b.Val(b.Out(i, name, shape, dt, why)).Grad = false
	}
	fp32Acc := b.Dtype(gw) == units.FP32
	switch {
	case lv.AddmmOut && fp32Acc && compute != units.FP32:
		if b.Dtype(x) != compute {
			out("input_chunk."+k, []int64{n, h}, compute, "the input chunk cast to the logits' dtype for addmm(out_dtype=fp32)")
		}
	case lv.MMFloat:
		out("grad_weight_mm."+k, []int64{vocab, h}, compute, "torch.mm(grad_logits.t(), input_chunk): a V x H product per chunk")
		if compute != units.FP32 {
			out("grad_weight_mm_fp32."+k, []int64{vocab, h}, units.FP32, ".float() of the V x H product, added into grad_weight")
		}
	}
}
