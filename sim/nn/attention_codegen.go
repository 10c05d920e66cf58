package nn

import (
	"github.com/memsh/memsh/sim/core"
)

// CodeGen's attention (CodeGenAttention, models/codegen/modeling_codegen.py
// at transformers 5.25.0): one qkv_proj whose output is laid out as the
// mp_num = 4 model-parallel shards CodeGen was trained with, and a rotary
// whose tables stay fp32.
//
//	qkv = qkv_proj(x).view(*input_shape, -1, 3 * local_dim)  # [b, s, 4, 3 x dim/4]
//	query, value, key = qkv.split(local_dim, dim=-1)
//	query = query.reshape(hidden_shape)                      # [b, s, heads, head_dim]
//
// The split's parts are strided [b, s, 4, dim/4] views; reshape makes
// them [b, s, heads, head_dim] with a copy unless a shard is one head
// (heads = 4, where the shapes agree and q, k and v stay views of qkv's
// storage, as FusedQKV's). CodeGenRotaryEmbedding hands the layers
// embed_positions[position_ids] without casting it, and that buffer,
// made by .float(), stays fp32 when from_pretrained loads the model in
// 16-bit: q x cos promotes q and k to fp32, and
// query.transpose(1, 2).to(value.dtype) casts them back, a copy in
// 16-bit (measured on the CPU, sim/codegen_test.go).

// qkvCopies says whether q, k and v are copies of QKVShards' parts: a
// shard's part is not one head (head_dim, which a tensor-parallel rank's
// copy keeps, is not dim / shards).
func (a *Attention) qkvCopies() bool {
	return a.FusedQKV && a.QKVShards > 0 && a.Hd() != a.Dim/a.QKVShards
}

// shardedQKV is q, k and v from the fused projection's output qkv:
// qkv itself (views) where a shard is one head, else the three copies
// reshape makes of its parts, in the order CodeGen reshapes them (q, k,
// then v).
func (a *Attention) shardedQKV(b *core.Builder, qkv core.Value, s []int64, h, d int64) (q, k, v core.Value) {
	if !a.qkvCopies() {
		return qkv, qkv, qkv
	}
	part := func(name string) core.Value {
		i := b.AddOp("copy", b.Concat("reshape_", name), []core.Value{qkv})
		y := b.Out(i, name, core.WithLast(s, h*d), b.Dtype(qkv), b.Concat(name, " reshaped to heads from qkv_proj's ", core.Itoa(a.QKVShards), " shards (a copy)"))
		b.Op(i).Bytes += float64(b.Val(y).Bytes)
		return y
	}
	q = part("query")
	k = part("key")
	v = part("value")
	return q, k, v
}

// castToV casts the rotated q and k to v's dtype (RopeToV).
func (a *Attention) castToV(b *core.Builder, q, k, v core.Value) (core.Value, core.Value) {
	dt := b.Dtype(v)
	return b.Cast(q, dt, "q cast to v's dtype after the fp32 rotary (.to(value.dtype))"),
		b.Cast(k, dt, "k cast to v's dtype after the fp32 rotary (.to(value.dtype))")
}
