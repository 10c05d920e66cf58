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
	return ropeAs(b, name, x, shape, core.Promote(b.Dtype(x), b.Prec.Params), tables...)
}

// ropeAs is rope with the rotated tensor's dtype dt (CodeGen's, promoted
// by its fp32 tables: attention_codegen.go).
func ropeAs(b *core.Builder, name string, x core.Value, shape []int64, dt units.DType, tables ...core.Value) core.Value {
	i := b.AddOp("rope", b.Concat("rope_", name), append([]core.Value{x}, tables...))
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
// once a forward, [1, seq, width] each in the embeddings' dtype:
// transformers' rotary_emb(hidden_states, position_ids) returns
// cos.to(x.dtype), x the input embeddings (OLMo 2's keeps them in fp32:
// a.RopeTablesDType), and a forward given no position_ids makes them
// arange(seq).unsqueeze(0), one row for the whole batch (LlamaModel.forward,
// 5.25.0; hf_block_saved.py at batch 2: two (1, 1, 64, 16) storages). The
// vision-language models' multimodal positions carry the batch
// (a.RopeTablesBatch). width is the head (a.RopeTablesDim: less under
// partial rotary, half for gpt-oss). Gemma 3 has two pairs
// (Gemma3TextModel.forward makes position_embeddings[layer_type] for each
// layer type: the local layers' from rope_local_base_freq). x is q's or
// k's shape, [..., seq, heads x head_dim]; name is "q" or "k"
// (RopeTablesEachCall makes a pair for each).
func (a *Attention) ropeTables(b *core.Builder, name string, x []int64) []core.Value {
	dt := a.RopeTablesDType
	if dt == units.InvalidDType {
		dt = b.Prec.Params
	}
	w := a.RopeTablesDim
	if w == 0 {
		w = a.Hd()
	}
	seq, rows := x[len(x)-2], int64(1)
	if a.RopeTablesBatch {
		rows = core.Rows(x) / seq
	}
	shape := []int64{rows, seq, w}
	if a.RopeTablesOwn {
		out, _ := tables(b, a.RopeTables, dt, shape, nil, "the rotary %s this layer's own rotary_emb makes, saved by its rope", "cos", "sin")
		return out
	}
	if a.RopeTablesEachCall {
		half := []int64{rows, seq, w / 2}
		once := forwardTables(b, a.RopeTables, dt, half, "cos", "sin")
		out, _ := tables(b, b.Concat(b.Name(a.RopeTables), ".", name), dt, shape, once, "the rotary %s repeat_interleaved for "+name+" (apply_rotary_pos_emb), saved by its products", "cos", "sin")
		return out
	}
	once := forwardTables(b, a.RopeTables, dt, shape, "cos", "sin")
	if !a.RopeTablesEachLayer {
		return once
	}
	// This layer's own pair, made from the forward's (GLM-4's
	// repeat_interleave, Qwen2.5-VL's section cat) inside the layer, so
	// recomputed under its checkpoint; its q and k share it. The
	// forward's pair is saved by nothing, but a checkpointed layer holds
	// it as an input until the backward.
	out, _ := tables(b, b.Name(a.RopeTables), dt, shape, once, "the rotary %s this layer makes from the forward's, saved by its rope", "cos", "sin")
	return out
}

// ropeTables are the tables a.RopeTables makes once a forward for seq
// tokens (none under Megatron's kernels, as Attention.rotate).
func (a *MLA) ropeTables(b *core.Builder, seq int64) []core.Value {
	switch {
	case a.RopeTables == "" || b.MegatronKernels():
		return nil
	case a.RopeComplex:
		return forwardTables(b, a.RopeTables, units.FP32, []int64{1, seq, a.RopeDim}, "freqs_cis")
	}
	dt := b.Prec.Params
	if a.Dots.RopeFP32 {
		dt = units.FP32
	}
	return forwardTables(b, a.RopeTables, dt, []int64{1, seq, a.RopeDim}, "cos", "sin")
}

// forwardTables are the tables (cos and sin, or DeepSeek-V2's one
// freqs_cis) a rotary embedding module makes once a forward and hands to
// every layer that uses it, whose rope saves them: the first such layer of
// this lowering makes them and the later ones read them (one storage each
// however many layers save them), outside every checkpoint region
// (core.OutsideRegions: each checkpointed layer keeps them as an input).
func forwardTables(b *core.Builder, module string, dt units.DType, shape []int64, names ...string) []core.Value {
	out, i := tables(b, module, dt, shape, nil, "the rotary %s made once a forward, saved by every layer's rope", names...)
	if i >= 0 {
		b.OutsideRegions(i) // the model's forward makes them before its layers, outside their checkpoints
	}
	return out
}

// tables are the tables names of module, made from the values from by
// the first caller (op i; -1 when an earlier caller made them) and
// shared by name with the later ones. what describes each, %s its name.
func tables(b *core.Builder, module string, dt units.DType, shape []int64, from []core.Value, what string, names ...string) ([]core.Value, int32) {
	key := fmt.Sprintf("%s.%s.%v.", module, dt.Name(), shape)
	out := make([]core.Value, len(names))
	if _, ok := b.SharedValue(key + names[0]); ok {
		for j, n := range names {
			out[j], _ = b.SharedValue(key + n)
		}
		return out, -1
	}
	i := b.AddOp("rope_tables", module, from)
	for j, n := range names {
		out[j] = b.Out(i, n, shape, dt, fmt.Sprintf(what, n))
		b.Val(out[j]).Grad = false
		b.Share(key+n, out[j])
	}
	b.Op(i).NoGradB = true
	return out, i
}

// ropeCatCopy reports whether the kernel's output reaches o_proj through
// a copy because q left the rotary embedding head major (RopeCat): under
// the flash kernels, flash-attn's, and SDPA's on the CPU or, on CUDA,
// where it runs flash: q in fp16 or bf16 (dt), heads of up to 256 and no
// mask (otherwise the memory-efficient kernel runs). Not under eager attention (its P.V
// product is head major whatever q's layout, lowered so) nor where
// Ulysses' all-to-all hands the kernel fresh seq-major tensors.
func (a *Attention) ropeCatCopy(b *core.Builder, la *Attention, dt units.DType) bool {
	if !a.RopeCat || !a.Rope || b.Par.Ulysses() {
		return false
	}
	switch a.Impl {
	case "flash":
		return true
	case "sdpa": // CUDA's flash kernel takes heads of up to 256
		return b.Rt.CPU || (!la.chunkMask && (dt == units.BF16 || dt == units.FP16) && a.Hd() <= 256)
	}
	return false
}
