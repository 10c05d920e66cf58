package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// DotsMLA is what Dots 3 Note's latent attention does beyond
// DeepSeek-V3's (Dots3NoteTextAttention.forward,
// models/dots3_note/modular_dots3_note.py at transformers 5.25.0). The
// zero value changes nothing.
type DotsMLA struct {
	// LatentScale: q_resid = q_a_layernorm(q_a_proj(x)) * (hidden /
	// q_lora_rank)^0.5, what q_b_proj and the indexer read, and k_pass =
	// kv_a_layernorm(kv_pass) * (hidden / kv_lora_rank)^0.5, what
	// kv_b_proj reads: products by Python floats, new tensors that save
	// nothing (the norms' outputs are then saved by no one).
	LatentScale bool
	// KRopeNorm: the shared rope key (the last qk_rope_head_dim of
	// kv_a_proj_with_mqa's output, a view) goes through
	// k_rope_only_layernorm, an RMSNorm of its own width, before its
	// rotation (which saves only the tables); and the kv latent is made
	// contiguous before kv_a_layernorm (kv_pass.contiguous()), a copy the
	// norm saves in fp32 where the projection's output was (the rope key's
	// norm saves that whole storage instead, through its view).
	KRopeNorm bool
	// GateNative: HeadGate's sigmoid in the activations' dtype
	// (attn_output * gate.sigmoid(), no fp32 cast): sigmoid saves its
	// output and the product saves it and the merged heads.
	GateNative bool
	// Window: sliding_attention's window (sliding_window), 0 for none.
	// SDPA has no window: once the sequence reaches it transformers makes
	// a mask once a forward (create_sliding_window_causal_mask), which SDPA
	// converts to an additive bias at each call and its kernel keeps.
	Window int64
	// RopeFP32: the rope tables in fp32 whatever the model's dtype (the
	// indexed_attention layers', which Dots3NoteTextModel.forward makes
	// from inputs_embeds.float()); each product with them is then fp32,
	// cast back to q's and k's dtype, and the tables saved are fp32.
	RopeFP32 bool
}

// scaleQ is LatentScale's product on the normed q latent.
func (d DotsMLA) scaleQ(b *core.Builder, qa core.Value) core.Value {
	if !d.LatentScale {
		return qa
	}
	return b.Ew("mul", "q_resid", []core.Value{qa}, b.Shape(qa), b.Dtype(qa), "the normed q latent times sqrt(hidden / q_lora_rank)")
}

// kvLatent is kv_a_layernorm over the first kvLora features of kva (the
// projection's output): DeepSeek-V3's norm of a view, or Dots 3 Note's of
// a contiguous copy, then its scale.
func (d DotsMLA) kvLatent(b *core.Builder, kva core.Value, kvLora int64) core.Value {
	if !d.KRopeNorm {
		kvn := b.RmsNormSlice("kv_a_layernorm", kva, kvLora)
		return d.scaleKV(b, kvn)
	}
	c := b.Ew("contiguous", "kv_pass", []core.Value{kva}, core.WithLast(b.Shape(kva), kvLora), b.Dtype(kva), "kv_pass.contiguous(): the kv latent copied out of kv_a_proj_with_mqa's output")
	return d.scaleKV(b, b.RmsNorm("kv_a_layernorm", c, kvLora))
}

func (d DotsMLA) scaleKV(b *core.Builder, kvn core.Value) core.Value {
	if !d.LatentScale {
		return kvn
	}
	return b.Ew("mul", "k_pass", []core.Value{kvn}, b.Shape(kvn), b.Dtype(kvn), "the normed kv latent times sqrt(hidden / kv_lora_rank)")
}

// ropeKey is what the rope rotates for the shared key: kva's rope slice,
// normed by k_rope_only_layernorm under KRopeNorm.
func (d DotsMLA) ropeKey(b *core.Builder, kva core.Value, rope int64) core.Value {
	if !d.KRopeNorm {
		return kva
	}
	return b.RmsNormSlice("k_rope_only_layernorm", kva, rope)
}

// windowBias is the sliding window's bias SDPA keeps once the sequence
// reaches the window (nn.Attention's: the mask made once a forward,
// converted at each call), NoValue below it.
func (d DotsMLA) windowBias(b *core.Builder, impl string, s []int64, dt units.DType) core.Value {
	w := &Attention{Causal: true, Window: d.Window, Impl: impl}
	if !w.windowMasked(s[len(s)-2]) {
		return core.NoValue
	}
	return w.sdpaBias(b, s, dt)
}

// validate refuses a window under another kernel than SDPA.
func (d DotsMLA) validate(path, impl string) error {
	if d.Window > 0 && impl != "sdpa" {
		return fieldErr(path, fmt.Sprintf("a sliding window is modelled under SDPA only for multi-head latent attention (got %s)", impl)).
			withHint("use ", FieldImpl, `="sdpa": Dots 3 Note has no flash path (_supports_flash_attn = False)`)
	}
	return nil
}

// dotsGate is GateNative's o * sigmoid(g) per head, g = g_proj(x).
func dotsGate(b *core.Builder, g, o core.Value) core.Value {
	i := b.AddOp("sigmoid", "gate", []core.Value{g})
	sg := b.Out(i, "gate_sigmoid", b.Shape(g), b.Dtype(g), "gate.sigmoid() in the activations' dtype, saved by sigmoid and by the product")
	b.Save(i, sg)
	b.Op(i).Flops = 4 * float64(core.Numel(b.Shape(g)))
	return b.Mul("gated", o, sg)
}
