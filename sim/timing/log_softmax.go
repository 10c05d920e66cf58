package timing

import (
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// softmaxSmemBytes is the shared memory a CUDA block gets without opting
// in (cudaDeviceProp.sharedMemPerBlock, 48 KiB on every GPU since
// Kepler), which PyTorch's softmax kernels size their cached row by.
const softmaxSmemBytes = 48 << 10

// crossEntropy prices, in eager dispatch, torch's cross_entropy over
// [rows, vocab] logits (F.cross_entropy: log_softmax, then nll_loss) by
// the bytes its kernels move, aten/src/ATen/native/cuda/SoftMax.cu
// (host_softmax, host_softmax_backward) and Loss.cu:
//
//   - log_softmax's forward over a row wider than the shared memory of a
//     block (sharedMemPerBlock, 48 KiB: above 12,288 fp32 logits, every
//     language model's vocabulary) is cunn_SoftMaxForward: one block a
//     row reads the row three times (ilpReduce for the max, again for
//     the sum of exponentials, WriteFpropResults for the output) and
//     writes it once. A narrower row is read once (the persistent
//     kernel, or cunn_SoftMaxForwardSmem caching it). nll_loss's forward
//     reads one log-probability a row: the labels' bytes.
//   - Backward, nll_loss_backward zero-fills the log-probabilities'
//     gradient and writes -1/N at each row's target (two kernels), and
//     log_softmax_backward (cunn_SoftMaxBackward) reads that gradient
//     twice (ilpReduce for its sum, then WriteBpropResults with the saved
//     output) and the output once, and writes the logits' gradient (the
//     persistent kernel, rows up to 1,024 logits, reads the gradient
//     once).
//
// The profile of one Qwen3-0.6B step on an H200 (hf_profile.jsonl, run
// 19: 16,384 rows of 151,936 fp32 logits, 9.96 GB) shows the two
// softmax kernels at 9.60 ms and 9.73 ms: four passes over the logits
// each at 4.15 and 4.10 TB/s, 0.86 of the 4,800 GB/s peak (a copy
// reaches 0.88; memsh's stream rate, 0.741, puts them 16 % over). The
// vocabulary-parallel losses (one input: Megatron's, DTensor's
// loss_parallel) are vocabParallelCE's. ok is false for other ops:
// compiled dispatch (Inductor's own kernels) keeps stream's price.
func (pr *pricer) crossEntropy(op *core.OpInfo) (OpCost, bool) {
	if op.Kind == "cross_entropy" && localName(op) == core.FlashCE && len(op.In) == 2 {
		return pr.flashCE(op), true
	}
	if c, ok := pr.vocabParallelCE(op); ok {
		return c, true
	}
	if op.Kind != "cross_entropy" || pr.dispatch != DispatchEager || len(op.In) != 2 || len(op.Out) == 0 {
		return OpCost{}, false
	}
	p := pr.prog
	x, lsm, lab := &p.Values[op.In[0]], &p.Values[op.Out[0]], &p.Values[op.In[1]]
	// A chunked loss's chunk (core.ChunkCE) writes its log-probabilities
	// as [rows, vocab] from [batch, tokens, vocab] logits: the same rows.
	if len(x.Shape) == 0 || len(lsm.Shape) == 0 || x.Shape[len(x.Shape)-1] != lsm.Shape[len(lsm.Shape)-1] ||
		core.Numel(x.Shape) != core.Numel(lsm.Shape) {
		return OpCost{}, false
	}
	xb, lb := float64(x.Bytes), float64(lsm.Bytes)
	n := x.Shape[len(x.Shape)-1]
	row := float64(x.Bytes) / float64(max(core.Rows(x.Shape), 1))
	reads, gradReads := 3.0, 2.0
	if row < softmaxSmemBytes {
		reads = 1 // cached in shared memory, or the persistent kernel
	}
	if n <= 1024 && row <= 4096 {
		gradReads = 1 // the persistent backward
	}
	rest := max(op.Bytes-lb, 0) // the loss and total_weight
	fwd := reads*xb + lb + float64(lab.Bytes) + rest
	c := OpCost{FwdK: 2, Flops: op.Flops, Bytes: fwd}
	c.Fwd, c.Bound = streamTime(&pr.d, fwd)
	c.Fwd = max(c.Fwd, 2*kernelFloor)
	if in, _ := pr.needsGrad(op); in && !op.NoGradB {
		bwd := lb + (gradReads+1)*lb + xb + float64(lab.Bytes)
		c.Bwd, _ = streamTime(&pr.d, bwd)
		c.Bwd = max(c.Bwd, 3*kernelFloor)
		c.BwdK = 3
	}
	return c, true
}

// flashCE prices flash-attn's fused softmax cross-entropy (core.FlashCE),
// in every dispatch (an extension's kernels, which a compiler does not
// fuse), by its kernels' bytes (csrc/xentropy/xentropy_kernel.cu at
// v1.0.9, Apex's xentropy): cunn_SoftMaxXEntropyForward reads each row
// twice (ilpReduce of the max with the label's logit, then of the
// exponentials) and writes a loss and a log-sum-exp; the backward
// (cunn_SoftMaxXEntropyBackward) reads the logits once and writes their
// gradient. Beside them, labels == ignore_index and masked_fill_ on the
// row losses, forward and backward (a row's bytes each).
func (pr *pricer) flashCE(op *core.OpInfo) OpCost {
	p := pr.prog
	x, lab := &p.Values[op.In[0]], &p.Values[op.In[1]]
	xb, rows := float64(x.Bytes), float64(lab.Bytes)+op.Bytes
	fwd := 2*xb + 2*rows
	c := OpCost{FwdK: 3, Flops: op.Flops, Bytes: fwd}
	c.Fwd, c.Bound = streamTime(&pr.d, fwd)
	c.Fwd = max(c.Fwd, 3*kernelFloor)
	if in, _ := pr.needsGrad(op); in && !op.NoGradB {
		bwd := 2*xb + 2*rows
		c.Bwd, _ = streamTime(&pr.d, bwd)
		c.Bwd = max(c.Bwd, 3*kernelFloor)
		c.BwdK = 3
	}
	return c
}

// vocabParallelCE prices, in eager or fused dispatch (Megatron's loss is
// plain PyTorch beside Transformer Engine's kernels; its
// --cross-entropy-loss-fusion is not modelled), the cross-entropy of a rank's
// vocabulary shard of the logits (one input: core's vocabParallelCE and
// torchLossParallel) by the passes its kernels make over the shard's E
// elements, d bytes each:
//
//   - Megatron's _VocabParallelCrossEntropy (megatron/core/tensor_parallel/
//     cross_entropy.py): forward, .float() ((d+4)·E, none from fp32), max
//     (4E), the max subtracted in place (8E), exp in place (8E), the sum
//     (4E), the division in place (8E); backward, grad_input.mul_ by
//     grad_output in place (8E) and autograd's cast of the gradient back
//     to the logits' dtype ((4+d)·E). Beside them, row-sized kernels:
//     the target mask and shifted target, the predicted logit's gather,
//     its masking and the log (megatronCESmallKernels forward), and the
//     target's update (megatronCESmallKernelsBwd).
//   - the same under --cross-entropy-loss-fusion (core/fused_ce.go): its
//     four compiled functions' passes (fusedCEPasses).
//   - Transformer Engine's parallel_cross_entropy (core/fused_ce.go):
//     forward, the online softmax reads the logits (d·E), the loss kernel
//     reads them again and writes the gradient over them (2d·E); backward,
//     element_mul_kernel scales them in place (2d·E). Beside them the two
//     row-sized zeros (m_d_X_y and loss_1d: teCESmallKernels).
//   - torch's loss_parallel() (_log_softmax as torch._decomp writes it, in
//     fp32, then cast back; its backward fused with nll_loss's): forward,
//     the fp32 copy ((d+4)·E), amax (4E), x - max (8E), exp (8E) and its
//     sum (4E), the shifted values minus the log-sum-exp (8E), the cast
//     back ((4+d)·E); backward in the logits' dtype, zeros_like (d·E),
//     exp(result) (2d·E), their sum (3d·E), times grad_output (2d·E).
//
// Both ran at the stream price (their outputs' bytes) until the eager
// cross-entropy took its kernels' bytes, which made a vocabulary-parallel
// loss look several times cheaper than the same loss on one GPU.
func (pr *pricer) vocabParallelCE(op *core.OpInfo) (OpCost, bool) {
	if op.Kind != "cross_entropy" || len(op.In) == 0 || len(op.In) > 2 || pr.dispatch.compiles() { // the logits, and Megatron's the targets; every op comes here: the name last
		return OpCost{}, false
	}
	name := localName(op)
	fused, te := name == core.FusedVocabParallelCE, name == core.TEParallelCEOp
	megatron := fused || te || name == "vocab_parallel_cross_entropy"
	if !megatron && name != "loss_parallel_cross_entropy" {
		return OpCost{}, false
	}
	x := &pr.prog.Values[op.In[0]]
	e, d := float64(core.Numel(x.Shape)), float64(x.Dtype.Bytes(1))
	upcast := 0.0 // bytes of one cast between the logits' dtype and fp32, none from fp32
	var casts float64
	if x.Dtype != units.FP32 {
		upcast, casts = (d+4)*e, 1
	}
	var fwd, bwd, fwdK, bwdK, smallF, smallB float64
	switch {
	case te: // two Triton kernels over the logits in their dtype, none in fp32
		fwd, fwdK, bwd, bwdK = 3*d*e, 2, 2*d*e, 1
		smallF, smallB = teCESmallKernels, 0
	case fused:
		fwd, fwdK, bwd, bwdK = fusedCEPasses(e, x.Dtype)
		smallF, smallB = fusedCESmallKernels, fusedCESmallKernelsBwd
	case megatron:
		fwd, fwdK = upcast+32*e, 5+casts
		bwd, bwdK = 8*e+upcast, 1+casts
		smallF, smallB = megatronCESmallKernels, megatronCESmallKernelsBwd
	default:
		fwd, fwdK = 2*upcast+32*e, 5+2*casts
		bwd, bwdK = 8*d*e, 4
		smallF, smallB = torchLossParallelSmallKernels, 1
	}
	c := OpCost{FwdK: fwdK + smallF, Flops: op.Flops, Bytes: fwd}
	c.Fwd, c.Bound = streamTime(&pr.d, fwd)
	c.Fwd = max(c.Fwd, fwdK*kernelFloor) + smallF*kernelFloor
	if in, _ := pr.needsGrad(op); in && !op.NoGradB {
		c.Bwd, _ = streamTime(&pr.d, bwd)
		c.Bwd = max(c.Bwd, bwdK*kernelFloor) + smallB*kernelFloor
		c.BwdK = bwdK + smallB
	}
	return c, true
}

// megatronCESmallKernels are the row-sized kernels of Megatron's
// vocabulary-parallel cross-entropy forward (cross_entropy.py):
// target < start, target >= end and their or (the mask), target.clone()
// - start and masked_target[mask] = 0, arange, the predicted logits'
// gather and clone, predicted_logits[mask] = 0, log(sum) - predicted
// (two): eleven. megatronCESmallKernelsBwd are its backward's: arange,
// 1 - mask.float() (two) and the indexed subtraction: four.
const (
	megatronCESmallKernels    = 11
	megatronCESmallKernelsBwd = 4
)

// torchLossParallelSmallKernels are loss_parallel's row-sized forward
// kernels beside its passes over the logits: the log of the sum, the
// target's mask and gather, the masked fill and the loss's reduction.
const torchLossParallelSmallKernels = 5

// localName is op's name within its module: the lowering scopes it
// ("loss.flash_cross_entropy"), the rules above name the op itself.
func localName(op *core.OpInfo) string {
	return op.Name[strings.LastIndexByte(op.Name, '.')+1:]
}

// fusedCEPasses are the bytes and kernels of the passes over the shard's
// e elements of dtype dt that Megatron's fused vocabulary-parallel cross-entropy makes,
// its four functions compiled by Inductor (core/fused_ce.go; read from
// Inductor's output code on the CPU, torch 2.6.0 and 2.15):
//   - forward: the fp32 copy and the row max in one pass ((d+4)·e for d
//     bytes an element; a max alone, 4e, from fp32: .float() is then the
//     logits themselves), the
//     max subtracted and exp written in place with their row sums (8e),
//     the division in place (8e);
//   - backward: the saved softmax cloned (8e: index_put's lowering), then
//     the clone times grad_output, written back into the softmax (the
//     function mutates its input) and as the bf16 gradient it returns
//     (4e + 4e + 2e); an fp16 gradient is cast again by autograd (4e).
func fusedCEPasses(e float64, dt units.DType) (fwd, fwdK, bwd, bwdK float64) {
	fwd, fwdK = 4*e+16*e, 3
	if dt != units.FP32 {
		fwd = (float64(dt.Bytes(1))+4)*e + 16*e
	}
	bwd, bwdK = 8*e+10*e, 2
	if dt == units.FP16 {
		bwd, bwdK = bwd+4*e, 3
	}
	return fwd, fwdK, bwd, bwdK
}

// fusedCESmallKernels are the fused loss's row-sized kernels beside its
// passes: the target's mask and shift, the predicted logit's gather and
// masking, and the log of the sums less it; fusedCESmallKernelsBwd the
// backward's indexed subtraction.
const (
	fusedCESmallKernels    = 3
	fusedCESmallKernelsBwd = 1
)

// teCESmallKernels are parallel_cross_entropy's row-sized forward kernels:
// torch.zeros of loss_1d and of m_d_X_y (triton/cross_entropy.py at
// TransformerEngine release_v2.3).
const teCESmallKernels = 2

// logSoftmax prices a log_softmax op of its own (the DPO trainers'
// log-probabilities: core/dpo_logits.go, core/trl_logits.go) in eager
// dispatch by its kernels' passes, as crossEntropy's log_softmax:
// host_softmax copies a non-contiguous input first (the op's WorkF: read
// and written once), cunn_SoftMaxForward reads a row wider than a block's
// shared memory three times and writes it once (a narrower row is read
// once), and cunn_SoftMaxBackward reads the output's gradient twice (once
// for the persistent kernel) and the output once and writes the input's
// gradient. ok is false for other ops and under a compiler.
func (pr *pricer) logSoftmax(op *core.OpInfo) (OpCost, bool) {
	if op.Kind != "log_softmax" || pr.dispatch != DispatchEager || len(op.In) != 1 || len(op.Out) != 1 {
		return OpCost{}, false
	}
	out := &pr.prog.Values[op.Out[0]]
	if len(out.Shape) == 0 || out.Bytes == 0 {
		return OpCost{}, false
	}
	lb := float64(out.Bytes)
	n := out.Shape[len(out.Shape)-1]
	row := lb / float64(max(core.Rows(out.Shape), 1))
	reads, gradReads := 3.0, 2.0
	if row < softmaxSmemBytes {
		reads = 1
	}
	if n <= 1024 && row <= 4096 {
		gradReads = 1
	}
	fwd, k := (reads+1)*lb, 1.0
	if op.WorkF > 0 { // the contiguous copy
		fwd += 2 * float64(op.WorkF)
		k++
	}
	c := OpCost{FwdK: k, Flops: op.Flops, Bytes: fwd}
	c.Fwd, c.Bound = streamTime(&pr.d, fwd)
	c.Fwd = max(c.Fwd, k*kernelFloor)
	if in, _ := pr.needsGrad(op); in && !op.NoGradB {
		c.Bwd, _ = streamTime(&pr.d, (gradReads+2)*lb)
		c.Bwd = max(c.Bwd, kernelFloor)
		c.BwdK = 1
	}
	return c, true
}
