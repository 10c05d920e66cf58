// Package timing is the time model: the step time, MFU, HFU and tokens per
// second of a replayed program (docs/time.md). Every op is priced from its
// shape on the plan's GPU (ops.go): matmuls as GEMMs at the GPU's measured
// matmul rate and copy bandwidth, flash attention on its kernel's
// published curve, gathers and scatters from their access pattern, the
// rest as streams of bytes (kernels.go, graph.go, with the rates of
// sim/hw/kernels.go; on GPUs where PyTorch's eager kernels were
// measured, binary ops with a broadcast or strided operand, Hugging
// Face's RMSNorm multiplies and rotary embedding, the grouped_mm experts'
// activation on gate_up's strided halves and RMSNorm's mean backward, at
// TensorIterator's generic kernel's rate: row_broadcast.go, rope.go,
// strided.go, row_mean.go; advanced indexing's backward at index_put_'s
// measured rate: graph.go; the loss at its kernels' passes, eager,
// flash-attn's and vocabulary-parallel cross-entropy: log_softmax.go; a
// training loop's cross-entropy metrics: train_metrics.go; in eager dispatch an add's, a cast's and a
// reused tensor's backward follow autograd's own rules: backward.go). Kernels' CPU dispatch bounds each phase from below
// (dispatch.go; a group of ops whose aten ops are counted, at the host's
// measured time per aten op: host_ops.go), and a phase with host syncs
// is replayed on two clocks, split at the syncs (host_sync.go); the
// optimizer step streams its traffic and launches its
// implementation's kernels (optimizer.go). Collectives take their bytes
// over the NVLink or network bandwidth of their process group, overlapped
// with compute where the framework overlaps them (comm.go); pipelines add
// the bubble of their schedule (pipeline.go); offload and host-placed
// tables add their PCIe transfers and host memory access, torchtune's
// activation copies only where its side stream cannot hide them behind
// the replayed ops (offload.go).
//
// It reads a replay's figures (sim/replay) and never changes memory.
package timing
