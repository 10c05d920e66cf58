package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Gemma4Attention is Gemma 4's self-attention (Gemma4TextAttention in
// transformers' models/gemma4/modeling_gemma4.py, 5.17.0):
//
//	q = rope(q_norm(q_proj(x)))
//	k = rope(k_norm(k_proj(x)))
//	v = v_norm(v_proj(x))      (KEqV: v_norm(k_proj(x)), no v_proj)
//	o_proj(attention(q, k, v))
//
// q_norm and k_norm are Gemma 4 RMSNorms with a weight over each head,
// v_norm one without (Gemma4Norm); the scores are not scaled (scaling
// 1.0, which changes no tensor's size). The full-attention layers of the
// larger models have their own head_dim (global_head_dim) and kv heads
// (num_global_key_value_heads), and with attention_k_eq_v reuse the key
// projection as the values: the hf reader builds one Gemma4Attention per
// layer type. The rotary embedding runs over the whole head, as
// transformers applies it (the proportional rope of the full layers
// rotates a quarter of each head: the rest of its cos and sin tables are 1
// and 0, the same tensors).
//
// Sliding layers attend to the last Window keys; under SDPA, once the
// sequence reaches the window (masking_utils _ignore_causal_mask_sdpa:
// kv_length >= window), transformers hands the kernel the sliding mask,
// which it keeps as an additive bias. flash-attn 2 has no
// kernel for heads wider than 256 (its mha_fwd checks "FlashAttention
// forward only supports head dimension at most 256"), so Validate refuses
// Impl "flash" for them.
type Gemma4Attention struct {
	Name                    string
	Dim, Heads, KVHeads, HD int64
	Impl                    string // flash | sdpa | eager
	Window                  int64
	KEqV                    bool
	Dropout                 float64
	EnableGQA               bool // SDPA gets the kv heads as they are (transformers >= 4.54 without a mask)
	NoCausal                bool // use_bidirectional_attention="all"
	// VisionBidir: use_bidirectional_attention="vision" (26B A4B, 31B):
	// with images, transformers (create_masks_for_vision_model) lets each
	// image's tokens see one another in the sliding layers, a mask SDPA
	// always gets there: converted to an additive bias it keeps, and no
	// enable_gqa (repeat_kv's copies); the full layers stay causal.
	VisionBidir bool
	// MaskAlways: the model hands every layer a mask, images or not:
	// Gemma4UnifiedModel (transformers 5.25.0) passes block_sequence_ids
	// whenever use_bidirectional_attention is "vision", and
	// create_masks_for_generate then never leaves the mask to SDPA's
	// is_causal (allow_is_causal_skip False): SDPA keeps it as an
	// additive bias in the full layers too, and gets no enable_gqa.
	MaskAlways bool
	// KV names the layer type whose keys and values StoreKV leaves and
	// SharedKV reads (num_kv_shared_layers: the last layers of E2B and
	// E4B reuse the keys and values of the last earlier layer of their
	// type, shared_kv_states in transformers): StoreKV keeps k after the
	// rotary embedding and v after v_norm; SharedKV has no k_proj, v_proj,
	// k_norm or v_norm and reads them (the same storages: nothing more
	// kept for them).
	KV                string
	StoreKV, SharedKV bool
	// RopeTables names the rotary embedding whose cos and sin, [1, seq,
	// head_dim] in the model's dtype, Gemma4TextModel makes once a forward
	// for each layer type (position_embeddings[layer_type]) and every
	// layer's rope saves (forwardTables; the full layers' proportional
	// rope makes them a whole head wide); "" for none.
	RopeTables string
	// EagerMask: eager attention adds the float mask transformers makes
	// once a forward for this layer's type (Attention.EagerMask;
	// masking_utils' causal_mask_mapping: one for the sliding layers, one
	// for the full ones, even where the window holds the whole sequence).
	EagerMask bool
}

func (a *Gemma4Attention) Kind() string           { return "gemma4_attention" }
func (a *Gemma4Attention) Label() string          { return a.Name }
func (a *Gemma4Attention) DefaultName() string    { return "self_attn" }
func (a *Gemma4Attention) Children() []core.Layer { return nil }
func (a *Gemma4Attention) InDim() int64           { return a.Dim }
func (a *Gemma4Attention) OutDim() int64          { return a.Dim }

func (a *Gemma4Attention) Params() int64 {
	if a.SharedKV {
		return 2*a.Dim*a.Heads*a.HD + a.HD
	}
	n := 2*a.Dim*a.Heads*a.HD + a.Dim*a.KVHeads*a.HD + 2*a.HD
	if !a.KEqV {
		n += a.Dim * a.KVHeads * a.HD
	}
	return n
}

func (a *Gemma4Attention) Summary() string {
	s := fmt.Sprintf("dim %d, %d heads, %d kv heads, head_dim %d", a.Dim, a.Heads, a.KVHeads, a.HD)
	if a.KEqV {
		s += ", k = v"
	}
	if a.Window > 0 {
		s += fmt.Sprintf(", window %d", a.Window)
	}
	return s + ", " + a.Impl
}

func (a *Gemma4Attention) Validate(path string) error {
	for _, f := range []struct {
		what string
		n    int64
	}{{"dim", a.Dim}, {"heads", a.Heads}, {"kv_heads", a.KVHeads}, {"head_dim", a.HD}} {
		if err := core.Positive(path, f.what, f.n); err != nil {
			return err
		}
	}
	if a.Heads%a.KVHeads != 0 {
		return units.Errorf(path, "kv_heads must divide heads (heads=%d, kv_heads=%d)", a.Heads, a.KVHeads)
	}
	switch a.Impl {
	case "sdpa", "eager":
	case "flash":
		if a.HD > 256 {
			return &FieldError{Path: path, Msg: []any{fmt.Sprintf("flash-attn 2 has no kernel for head_dim %d (at most 256)", a.HD)},
				Hint: []any{"Gemma 4's full-attention layers have global_head_dim 512: use ", FieldImpl, `="sdpa"`}}
		}
	default:
		return units.Errorf(path, "unknown attention impl %q (known: flash, sdpa, eager)", a.Impl)
	}
	if (a.StoreKV || a.SharedKV) && (a.KV == "" || a.StoreKV && a.SharedKV) {
		return units.Errorf(path, "a layer stores or reads (not both) the keys and values of a named layer type")
	}
	if a.Window < 0 {
		return units.Errorf(path, "window must be positive, or 0 for none (got %d)", a.Window)
	}
	if a.Dropout < 0 || a.Dropout >= 1 {
		return units.Errorf(path, "dropout must be in [0, 1) (got %g)", a.Dropout)
	}
	return nil
}

// kernel is the attention kernel as nn.Attention lowers it.
func (a *Gemma4Attention) kernel() *Attention {
	return &Attention{Name: a.Name, Dim: a.Dim, Heads: a.Heads, KVHeads: a.KVHeads, HeadDim: a.HD, Impl: a.Impl,
		Causal: !a.NoCausal, Window: a.Window, Dropout: a.Dropout, Rope: true, SoftmaxFP32: true, EnableGQA: a.EnableGQA,
		EagerMask: a.EagerMask}
}

// CheckLayout: tensor parallelism splits the heads as for nn.Attention;
// context parallelism is not modelled for this layer.
func (a *Gemma4Attention) CheckLayout(path string, par core.Parallelism) error {
	if par.PP > 1 && (a.StoreKV || a.SharedKV) {
		return &units.Error{Path: path, Msg: "pipeline parallelism is not modelled for Gemma 4's layers that share keys and values",
			Hint: "use pp=1"}
	}
	if par.CP > 1 {
		return &units.Error{Path: path, Msg: "context parallelism is not modelled for Gemma 4's attention", Hint: "use cp=1"}
	}
	return a.kernel().checkTP(path, max(par.TP, 1))
}

func (a *Gemma4Attention) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != a.Dim {
		panic(core.ShapeMismatch(b, "gemma4_attention", a.Dim, b.Last(x)))
	}
	name := b.ModuleName(a)
	defer b.Scope(name)()
	att := a.kernel()
	if (a.VisionBidir && a.Window > 0 && b.Images.Count > 0 || a.MaskAlways) && a.Impl == "sdpa" {
		att.chunkMask = true
	}
	if att.Window > b.Seq && a.Impl != "eager" { // the window holds every key: transformers passes no mask (it keeps one from kv_length >= window); eager's is the sliding layers' own
		att.Window = 0
	}
	if att.Window > 0 && a.Impl == "sdpa" {
		// a window the sequence reaches: transformers hands SDPA the
		// sliding mask, which it keeps as an additive bias (and takes k
		// and v expanded: no enable_gqa with a mask)
		att.chunkMask = true
	}
	la := att.perRank(b.Par.Tpn())
	d, h, kv := la.Hd(), la.Heads, la.Kv()
	xg := b.TpGatherFP8(x)
	s := b.Shape(xg)
	q := b.ColLinear("q_proj", core.RoleQ, x, xg, a.Dim, a.Heads*d, h*d, false)
	q = gemma4HeadNorm(b, "q_norm", q, s, h, d, true)
	tables := a.ropeTables(b, s[len(s)-2], d)
	q = rope(b, "q", q, core.WithLast(s, h*d), tables...)
	k, v := a.keysValues(b, x, xg, s, kv, d, tables)
	kl, vl := seqMajor, seqMajor
	if kv != h && !la.sdpaGQA(b) && a.Impl != "flash" {
		k = expandKV(b, "k", k, core.WithLast(s, h*d), kv)
		v = expandKV(b, "v", v, core.WithLast(s, h*d), kv)
		kl, vl = headMajor, headMajor
		if kv == 1 {
			kl, vl = expandedHeads, expandedHeads
		}
	}
	closeRegion := func() {}
	if b.Ckpt.Selective {
		closeRegion = b.PolicyRegion("core")
	}
	if b.Prec.Autocast {
		q = b.Cast(q, b.Prec.Compute, "autocast copy of q for the attention kernel")
		k, kl = castHeads(b, "k", k, kl, core.WithLast(s, h*d))
		v, vl = castHeads(b, "v", v, vl, core.WithLast(s, h*d))
	}
	var o core.Value
	if a.Impl == "eager" {
		o = la.eager(b, q, k, v, s, kl, vl)
	} else {
		o = la.Fused(b, q, k, v, s)
	}
	closeRegion()
	y := b.RowLinear("o_proj", core.RoleO, o, a.Heads*d, h*d, a.Dim, false)
	return b.Dropout("resid_dropout", y, a.Dropout)
}

// ropeTables are the cos and sin of this layer's type for seq tokens of
// heads d wide (none under Megatron's kernels, as Attention.rotate).
func (a *Gemma4Attention) ropeTables(b *core.Builder, seq, d int64) []core.Value {
	if a.RopeTables == "" || b.MegatronKernels() {
		return nil
	}
	return forwardTables(b, a.RopeTables+"."+a.KV, b.Prec.Params, []int64{1, seq, d}, "cos", "sin")
}

// keysValues lowers k_proj, v_proj and their norms (and the rotary
// embedding of k), or reads the keys and values a SharedKV layer reuses.
func (a *Gemma4Attention) keysValues(b *core.Builder, x, xg core.Value, s []int64, kv, d int64, tables []core.Value) (core.Value, core.Value) {
	kKey, vKey := "gemma4.kv."+a.KV+".k", "gemma4.kv."+a.KV+".v"
	if a.SharedKV {
		k, ok1 := b.SharedValue(kKey)
		v, ok2 := b.SharedValue(vKey)
		if !ok1 || !ok2 {
			panic(core.LowerError{Err: &units.Error{Path: b.Name(""), Msg: "no earlier " + a.KV + " layer left the keys and values this layer reuses",
				Hint: "num_kv_shared_layers must leave a layer of each type before the shared ones"}})
		}
		return k, v
	}
	k := b.ColLinear("k_proj", core.RoleK, x, xg, a.Dim, a.KVHeads*d, kv*d, false)
	v := k
	if !a.KEqV {
		v = b.ColLinear("v_proj", core.RoleV, x, xg, a.Dim, a.KVHeads*d, kv*d, false)
	}
	k = gemma4HeadNorm(b, "k_norm", k, s, kv, d, true)
	k = rope(b, "k", k, core.WithLast(s, kv*d), tables...)
	v = gemma4HeadNorm(b, "v_norm", v, s, kv, d, false)
	if a.StoreKV {
		b.Share(kKey, k)
		b.Share(vKey, v)
	}
	return k, v
}
