package nn

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Context parallelism (Megatron-LM --context-parallel-size with
// TransformerEngine's ring attention, AttnFuncWithCPAndKVP2P in
// transformer_engine/pytorch/attention.py): every rank keeps s/cp tokens
// of each sequence through the whole layer (the plan's seq is divided by
// cp when lowering, core/tp.go configureLowering); only attention needs the
// other chunks. Their keys and values travel around the ring: while one
// chunk is used, the next is received, so two K/V chunks are in flight
// (p2p_comm_buffers) on top of the local ones. The backward passes the
// K/V chunks around again with their gradient contributions (dK, dV),
// double-buffered as well. Causal masking is load-balanced (each rank
// holds two half-chunks), so every rank does 1/cp of the attention work.

// ringAttention adds the ring buffers and the full-sequence work to the
// fused attention op i, whose local keys and values are k and v; kvSeen is
// the bytes of the keys and values the kernel reads (more than k's and
// v's when SDPA gets them repeated to every head), q the query.
func ringAttention(b *core.Builder, i int32, q, k, v core.Value, kvSeen int64) {
	cp := b.Par.Cpn()
	if cp == 1 || b.Par.Ulysses() {
		return
	}
	if b.Par.AllGatherCP() {
		allGatherAttention(b, i, q, kvSeen)
		return
	}
	kv := b.Val(k).Bytes + b.Val(v).Bytes
	if k == v { // one fused qkv storage: the k and v parts
		kv = 2 * b.Val(k).Bytes / 3
	}
	op := b.Op(i)
	op.WorkF += 2 * kv     // two K/V chunks in flight
	op.WorkB += 2 * 2 * kv // K/V and their dK/dV, double-buffered
	op.Flops *= float64(cp)
	b.RecordComm("send_recv", "cp", (cp-1)*kv, false)
	b.RecordComm("send_recv", "cp", 2*(cp-1)*kv, true)
}

// allGatherAttention is torch's context_parallel() as PyTorch 2.6 runs it
// (torch/distributed/tensor/experimental/_attention.py, December 2024:
// _templated_ring_attention and its backward, the default rotate method
// _RotateMethod.ALL_GATHER, load balancing and convert_to_f32 on; what
// torchtitan's cp uses). The op's keys and values (kv bytes, contiguous,
// repeated to every head with SDPA) are concatenated and all-gathered
// from every cp rank at once, and each step's kernel reads one rank's
// chunk of that buffer:
//
//   - forward: the gathered keys and values of the cp ranks (cp x kv)
//     live through the op; _SDPAMerger takes each step's output to fp32
//     and merges it into the running fp32 output: the running output, the
//     step's fp32 copy, their difference and its product with the
//     sigmoid of the logsumexps are four fp32 tensors of the output's size
//     (o32) at once.
//   - backward: fp32 accumulators for dq (o32) and dk, dv (2 x kv in
//     fp32); the gathered keys and values again; each step's bf16 dq, dk,
//     dv from the kernel; and the fp32 dk, dv passed to the next rank
//     (torch.cat of the accumulators, then the all-to-all's output: two
//     buffers of 2 x kv in fp32).
//
// Each rank computes 1/cp of the causal attention (load-balanced halves).
//
// Each of these is a tensor of its own, allocated in this order (the
// kernel's own backward workspace, when the op has one, after the
// gathered keys and values): one lump of their sum needs a free block as
// large, which the recompute's saved inputs split between layers, so
// every other layer cached a new segment (Table 2 of torchtitan's
// benchmark, sim/calib_torchtitan_test.go, came out 1-5 GiB over with
// cp 2-8, the more the larger cp). The all-gather and the all-to-all are
// functional collectives (torch.distributed._functional_collectives): their
// outputs are allocated on the compute stream and run on NCCL's internal
// stream (ProcessGroupNCCL), which records them (record_stream); the
// compute stream waits for each collective before it reads the output
// (wait_tensor), so memsh takes NCCL's stream as done with a buffer when
// the op frees it, and the buffers come back to the compute stream's pool.
func allGatherAttention(b *core.Builder, i int32, q core.Value, kv int64) {
	cp := b.Par.Cpn()
	o32 := units.FP32.Bytes(core.Numel(b.Shape(q)))
	kv32 := 2 * kv // the key/value gradients in fp32, from bf16 keys and values
	if b.Dtype(q) == units.FP32 {
		kv32 = kv
	}
	op := b.Op(i)
	op.Work = &core.WorkTensors{
		F: append(nonZero(op.WorkF), cp*kv, o32, o32, o32, o32),
		B: append([]int64{o32, kv32 / 2, kv32 - kv32/2, cp * kv}, append(nonZero(op.WorkB),
			b.Val(q).Bytes, kv/2, kv-kv/2, kv32, kv32)...),
	}
	op.WorkF += cp*kv + 4*o32
	op.WorkB += cp*kv + o32 + 3*kv32 + b.Val(q).Bytes + kv
	op.Flops *= float64(cp)
	b.RecordComm("all_gather", "cp", cp*kv, false)
	b.RecordComm("all_gather", "cp", cp*kv, true)
	b.RecordComm("send_recv", "cp", (cp-1)*kv32, true)
}

// nonZero is the workspace n as a list of one tensor, none when zero.
func nonZero(n int64) []int64 {
	if n == 0 {
		return nil
	}
	return []int64{n}
}
