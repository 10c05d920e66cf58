package nn

import "github.com/memsh/memsh/sim/core"

// The key-value cache a transformers decoder builds in a training forward
// when use_cache is on (core.Plan.UseCache): LlamaModel.forward (5.25.0)
// makes a DynamicCache when use_cache and no cache is passed, and every
// layer's attention calls cache.update(k, v), whose DynamicLayer runs
// torch.cat([self.keys, key_states], dim=-2) from an empty tensor: a new,
// contiguous [batch, kv_heads, seq, head_dim] copy of k (after the rotary
// embedding) and of v, which the attention kernel then reads. The cache
// hangs off the model's output (out.past_key_values), so the copies live
// until the caller drops it. Measured on the CPU (torch 2.15.0,
// transformers 5.25.0, sim/kv_cache_test.go): where the kernel takes k and
// v as they are (SDPA with enable_gqa, no mask) the copies are what it
// saves and nothing more is kept; where it reads repeat_kv's expansion
// (eager attention, SDPA given a mask) the copies are kept besides.

// kvCache copies k and v ([..., seq, kv x head_dim] of shape s) into the
// cache: the copies, head major, which the model's output holds.
func kvCache(b *core.Builder, k, v core.Value, s []int64, kv, d int64) (core.Value, core.Value) {
	shape := core.WithLast(s, kv*d)
	kc := b.Ew("cat", "cache_keys", []core.Value{k}, shape, b.Dtype(k), "k in the DynamicCache (torch.cat), held by the model's output")
	vc := b.Ew("cat", "cache_values", []core.Value{v}, shape, b.Dtype(v), "v in the DynamicCache (torch.cat), held by the model's output")
	b.HoldOutput(kc, vc)
	return kc, vc
}
