package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// MllamaCrossBlock is one of Llama 3.2 Vision's cross-attention decoder
// layers (MllamaCrossAttentionDecoderLayer, MllamaTextCrossAttention in
// transformers' models/mllama/modeling_mllama.py), in the text model at
// the config's cross_attention_layers:
//
//	h = x + tanh(cross_attn_attn_gate) * cross_attn(input_layernorm(x), image states)
//	y = h + tanh(cross_attn_mlp_gate) * (row_mask * mlp(post_attention_layernorm(h)))
//
// cross_attn projects q from the text and k, v from the image states the
// vision model left (core.CrossStates, read by every cross layer: one
// storage), RMS-normalises q and k per head (q_norm, k_norm), has no
// rotary embedding, and runs SDPA under the additive cross-attention mask:
// with a mask, transformers (use_gqa_in_sdpa) expands k and v to every
// head first (repeat_kv, copies the kernel saves). Without images the
// layer is skipped, as transformers skips it for text-only input (its
// weights are registered).
type MllamaCrossBlock struct {
	Dim, Heads, KVHeads, HeadDim, Inter int64
	Act                                 string // the MLP's gated activation (swiglu)
	Impl                                string
}

func (c *MllamaCrossBlock) Kind() string           { return "mllama_cross_block" }
func (c *MllamaCrossBlock) Label() string          { return "" }
func (c *MllamaCrossBlock) DefaultName() string    { return "" } // a block of the decoder's layers
func (c *MllamaCrossBlock) Children() []core.Layer { return nil }
func (c *MllamaCrossBlock) InDim() int64           { return c.Dim }
func (c *MllamaCrossBlock) OutDim() int64          { return c.Dim }

func (c *MllamaCrossBlock) mlp() *MLP {
	return &MLP{Name: "mlp", Dim: c.Dim, Hidden: c.Inter, Act: c.Act}
}

// tensors lists the parameters besides the MLP's.
func (c *MllamaCrossBlock) tensors(fn func(name string, shape []int64, role core.Role)) {
	d, h, kv, hd := c.Dim, c.Heads, c.KVHeads, c.HeadDim
	fn("input_layernorm.weight", []int64{d}, core.RoleNorm)
	fn("cross_attn.q_proj.weight", []int64{h * hd, d}, core.RoleQ)
	fn("cross_attn.k_proj.weight", []int64{kv * hd, d}, core.RoleK)
	fn("cross_attn.v_proj.weight", []int64{kv * hd, d}, core.RoleV)
	fn("cross_attn.o_proj.weight", []int64{d, h * hd}, core.RoleO)
	fn("cross_attn.q_norm.weight", []int64{hd}, core.RoleNorm)
	fn("cross_attn.k_norm.weight", []int64{hd}, core.RoleNorm)
	fn("cross_attn_attn_gate", []int64{1}, core.RoleNorm)
	fn("cross_attn_mlp_gate", []int64{1}, core.RoleNorm)
	fn("post_attention_layernorm.weight", []int64{d}, core.RoleNorm)
}

func (c *MllamaCrossBlock) Params() int64 {
	n := c.mlp().Params()
	c.tensors(func(_ string, shape []int64, _ core.Role) { n += core.Numel(shape) })
	return n
}

func (c *MllamaCrossBlock) Summary() string {
	return fmt.Sprintf("cross-attention to the image states: dim %d, %d heads, %d kv heads, mlp %d", c.Dim, c.Heads, c.KVHeads, c.Inter)
}

func (c *MllamaCrossBlock) Validate(path string) error {
	for _, f := range []struct {
		what string
		n    int64
	}{{"hidden_size", c.Dim}, {"num_attention_heads", c.Heads}, {"num_key_value_heads", c.KVHeads}, {"head_dim", c.HeadDim}, {"intermediate_size", c.Inter}} {
		if err := core.Positive(path, f.what, f.n); err != nil {
			return err
		}
	}
	if c.Heads%c.KVHeads != 0 {
		return units.Errorf(path, "num_key_value_heads (%d) must divide num_attention_heads (%d)", c.KVHeads, c.Heads)
	}
	if err := c.mlp().Validate(path + ".mlp"); err != nil {
		return err
	}
	return checkMllamaImpl(path, c.Impl)
}

func (c *MllamaCrossBlock) CheckLayout(path string, par core.Parallelism) error {
	return checkMllamaLayout(path, par)
}

func (c *MllamaCrossBlock) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != c.Dim {
		panic(core.ShapeMismatch(b, "mllama_cross_block", c.Dim, b.Last(x)))
	}
	if b.Cross == nil { // text only: transformers skips the layer
		b.ReserveParams(13)
		// its linears keep PEFT's adapters, idle (idleParam)
		c.tensors(func(name string, shape []int64, role core.Role) { idleParam(b, name, shape, role) })
		done := b.Scope("mlp")
		m := c.mlp()
		idleParam(b, "gate_proj.weight", []int64{m.Hidden, m.Dim}, core.RoleGate)
		idleParam(b, "up_proj.weight", []int64{m.Hidden, m.Dim}, core.RoleUp)
		idleParam(b, "down_proj.weight", []int64{m.Dim, m.Hidden}, core.RoleDown)
		done()
		return x
	}
	d, h, kv, hd := c.Dim, c.Heads, c.KVHeads, c.HeadDim
	cs := b.Cross
	s := b.Shape(x)
	n := b.RmsNorm("input_layernorm", x, d)
	closeAttn := b.Scope("cross_attn")
	q := b.Linear("q_proj", core.RoleQ, n, d, h*hd, false)
	q = qkHeadNorm(b, "q_norm", q, s, h, hd, false)
	ks := b.Shape(cs.States)
	keys := ks[len(ks)-2]
	k := b.Linear("k_proj", core.RoleK, cs.States, d, kv*hd, false)
	v := b.Linear("v_proj", core.RoleV, cs.States, d, kv*hd, false)
	k = qkHeadNorm(b, "k_norm", k, ks, kv, hd, false)
	if kv != h { // repeat_kv: the mask rules out enable_gqa
		k = expandKV(b, "k", k, core.WithLast(ks, h*hd), kv)
		v = expandKV(b, "v", v, core.WithLast(ks, h*hd), kv)
	}
	a := &Attention{Dim: d, Heads: h, HeadDim: hd, Impl: c.Impl}
	o := maskedSDPA(b, a, q, k, v, core.WithLast(s, h*hd), cs.Mask, keys)
	y := b.Linear("o_proj", core.RoleO, o, h*hd, d, false)
	closeAttn()
	y = b.Mul("attn_gate", y, gateTanh(b, b.Param("cross_attn_attn_gate", []int64{1}, core.RoleNorm)))
	x = b.Add("residual", x, y)
	n = b.RmsNorm("post_attention_layernorm", x, d)
	y = b.LowerChild(c.mlp(), n)
	y = b.Mul("row_mask", y, cs.RowMask)
	y = b.Mul("mlp_gate", y, gateTanh(b, b.Param("cross_attn_mlp_gate", []int64{1}, core.RoleNorm)))
	return b.Add("residual_1", x, y)
}
