package timing

import (
	"github.com/memsh/memsh/sim/core"
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
// reaches 0.88; memsh's stream rate, 0.741, puts them 16 % over). ok is
// false for other ops: the vocabulary-parallel
// losses (one input: Megatron's, DTensor's loss_parallel) and compiled
// dispatch (Inductor's own kernels) keep stream's price.
func (pr *pricer) crossEntropy(op *core.OpInfo) (OpCost, bool) {
	if op.Kind == "cross_entropy" && op.Name == core.FlashCE && len(op.In) == 2 {
		return pr.flashCE(op), true
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
