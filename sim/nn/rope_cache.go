package nn

import (
	"fmt"

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
// in fp32 (Hugging Face Llama; tools/oracle vectors). With tables (cos
// and sin, ropeTables) the op reads them and saves them for backward
// (q * cos saves cos, rotate_half(q) * sin saves sin).
func rope(b *core.Builder, name string, x core.Value, shape []int64, tables ...core.Value) core.Value {
	i := b.AddOp("rope", b.Concat("rope_", name), append([]core.Value{x}, tables...))
	dt := core.Promote(b.Dtype(x), b.Prec.Params)
	y := b.Out(i, b.Concat(name, "_rot"), shape, dt, b.Concat("rotary-embedded ", name))
	if b.Grad(x) {
		b.Save(i, tables...)
	}
	per := dt.Bytes(core.Numel(shape))
	b.Op(i).WorkF = 2 * per // rotate_half cat and one product live at once
	b.Op(i).WorkB = 2 * per
	b.Op(i).Flops = 6 * float64(core.Numel(shape))
	return y
}

// ropeTables are the cos and sin the rotary embedding a.RopeTables makes
// once a forward, [1, seq, head_dim] each in the embeddings' dtype:
// transformers' rotary_emb(hidden_states, position_ids) returns
// cos.to(x.dtype), x the input embeddings (OLMo 2's keeps them in fp32:
// a.RopeTablesDType), and a forward given no position_ids makes them
// arange(seq).unsqueeze(0), one row for the whole batch (LlamaModel.forward,
// 5.25.0; hf_block_saved.py at batch 2: two (1, 1, 64, 16) storages).
// They are handed to every layer that uses them: the first such layer of
// this lowering makes them and the later ones read them (one pair of
// storages however many layers save them). Gemma 3 has two
// (Gemma3TextModel.forward makes position_embeddings[layer_type] for each
// layer type: the local layers' from rope_local_base_freq). x is q's or
// k's shape, [..., seq, heads x head_dim].
func (a *Attention) ropeTables(b *core.Builder, x []int64) []core.Value {
	dt := a.RopeTablesDType
	if dt == units.InvalidDType {
		dt = b.Prec.Params
	}
	shape := []int64{1, x[len(x)-2], a.Hd()}
	key := fmt.Sprintf("%s.%s.%v", a.RopeTables, dt.Name(), shape)
	if cos, ok := b.SharedValue(key + ".cos"); ok {
		sin, _ := b.SharedValue(key + ".sin")
		return []core.Value{cos, sin}
	}
	i := b.AddOp("rope_tables", "rotary_emb", nil)
	cos := b.Out(i, "cos", shape, dt, "the rotary cos made once a forward, saved by every layer's rope")
	sin := b.Out(i, "sin", shape, dt, "the rotary sin made once a forward, saved by every layer's rope")
	b.Val(cos).Grad, b.Val(sin).Grad = false, false
	b.Op(i).NoGradB = true
	b.Share(key+".cos", cos)
	b.Share(key+".sin", sin)
	return []core.Value{cos, sin}
}
