package nn

import "github.com/memsh/memsh/sim/core"

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
// fused attention op i, whose local keys and values are k and v.
func ringAttention(b *core.Builder, i int32, k, v core.Value) {
	cp := b.Par.Cpn()
	if cp == 1 || b.Par.Ulysses() {
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
