package nn

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// The rotary embedding: its op (rope, at the end) and its cached tables
// (Attention.RopeCache).
//
// transformers' LlamaRotaryEmbedding up to 4.40 and MistralRotaryEmbedding
// up to 4.41 build cos and sin for max_position_embeddings positions in
// __init__ and register them as non-persistent buffers, one embedding per
// attention layer: in the 4.40.0 wheel, modeling_llama.py ll. 104-113
// (register_buffer("_cos_cached", emb.cos().to(torch.get_default_dtype()),
// persistent=False), "For BC"; the forward computes cos and sin from
// inv_freq and no longer reads them) and ll. 291-297 (LlamaAttention
// ._init_rope); modeling_mistral.py ll. 101-116 (cos_cached, sin_cached,
// which its forward slices). The 4.41.0 wheel's Llama and the 4.42.0
// wheel's Mistral register neither. Each table is [positions, head_dim]
// in the default dtype when the module was built (fp32 unless the model
// was made under torch_dtype=...) until module.to(dtype) casts it. They
// are never trained, never sharded, and move to the device with the
// parameters: 2 x 4,096 x 128 x 4 B = 4 MiB an attention layer for
// Llama-2 in fp32, 32 MiB for Mistral 7B v0.2's 32,768 positions.
// inv_freq, head_dim / 2 values, is not counted.

// ropeCacheBuffers registers the cos and sin tables of head_dim d.
func (a *Attention) ropeCacheBuffers(b *core.Builder, d int64) {
	dt := a.RopeCacheDType
	if dt == units.InvalidDType {
		dt = b.Prec.Params
	}
	shape := []int64{a.RopeCache, d}
	b.Buffer("rotary_emb.cos_cached", shape, dt, "the rotary embedding's cached cos table (transformers before 4.41, register_buffer)")
	b.Buffer("rotary_emb.sin_cached", shape, dt, "the rotary embedding's cached sin table (transformers before 4.41, register_buffer)")
}

// rope applies rotary embeddings: q*cos + rotate_half(q)*sin. The products
// and the rotated copy are transient; cos and sin are buffers in the
// parameters' dtype (module.to() casts float buffers), so under autocast
// the bf16 projection times the fp32 buffers promotes: q and k leave RoPE
// in fp32 (Hugging Face Llama; tools/oracle vectors).
func rope(b *core.Builder, name string, x core.Value, shape []int64) core.Value {
	i := b.AddOp("rope", b.Concat("rope_", name), []core.Value{x})
	dt := core.Promote(b.Dtype(x), b.Prec.Params)
	y := b.Out(i, b.Concat(name, "_rot"), shape, dt, b.Concat("rotary-embedded ", name))
	per := dt.Bytes(core.Numel(shape))
	b.Op(i).WorkF = 2 * per // rotate_half cat and one product live at once
	b.Op(i).WorkB = 2 * per
	b.Op(i).Flops = 6 * float64(core.Numel(shape))
	return y
}
