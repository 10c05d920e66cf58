package litgpt

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// LitGPT's GPT (Lightning-AI/lit-gpt lit_gpt/model.py, lora.py, adapter.py,
// adapter_v2.py at commit 8641822, October 2023; the adapter files as of
// 0f021f3a) lowered as it runs under Lightning Fabric with
// precision="bf16-true" and finetune/*.py's training loop. It differs
// from the Hugging Face lowering in ways that move memory:
//
//   - one fused qkv projection; LoRA on it (LoRAQKVLinear) is one lora_A of
//     r*n_enabled rows, a grouped conv1d for lora_B and a zero_pad that
//     index_copies the update into a zero tensor of the qkv width
//     (index_copy keeps its source for backward: derivatives.yaml formula
//     expand_as(source));
//   - RMSNorm computed in the input dtype (lit_gpt/rmsnorm.py: mean of x*x,
//     no fp32 upcast);
//   - rotary embeddings on the first rope_n_elem channels of each head with
//     fp32 cos/sin buffers (build_rope_cache with the default dtype, fp32
//     when train() resets max_seq_length), so the products are fp32
//     transients;
//   - keys and values expanded to all heads before the kernel (expand +
//     reshape copies for GQA), then scaled_dot_product_attention (flash);
//   - the lm_head applied per 128-token chunk (lm_head_chunk_size=128),
//     every chunk converted to fp32 by Fabric's convert_output when the
//     forward returns (HalfPrecision / BitsandbytesPrecision convert the
//     module's outputs to the default dtype), cross-entropy per chunk
//     (utils.chunked_cross_entropy); the training loop keeps the fp32
//     logits list alive through backward.

// Config is lit_gpt.Config: the fields that shape memory.
type Config struct {
	Name                string
	BlockSize           int64
	PaddedVocab         int64
	Layers              int64
	Heads               int64
	QueryGroups         int64 // n_query_groups, 0 = Heads
	Embd                int64
	RotaryPercentage    float64
	ParallelResidual    bool
	SharedAttentionNorm bool
	Bias                bool
	LMHeadBias          bool
	Norm                string // LayerNorm | RMSNorm
	MLP                 string // GptNeoxMLP | LLaMAMLP
	Intermediate        int64
	GeluApproximate     string // none | tanh
	Adapter             string // "", "v1", "v2" (adapter.py, adapter_v2.py)
	AdapterPromptLength int64  // 10
	AdapterStartLayer   int64  // 2
	LMHeadChunk         int64  // lm_head_chunk_size of the training loop (128)
}

// Configs are the checkpoints of the LitGPT resource tables, with
// the values of lit_gpt/config.py at 8641822.
func Configs() []Config {
	return []Config{
		{Name: "phi-1_5", BlockSize: 2048, PaddedVocab: 51200, Layers: 24, Heads: 32, Embd: 2048, RotaryPercentage: 0.5,
			ParallelResidual: true, SharedAttentionNorm: true, Bias: true, LMHeadBias: true, Norm: "LayerNorm", MLP: "GptNeoxMLP",
			Intermediate: 8192, GeluApproximate: "tanh"},
		{Name: "stablelm-base-alpha-3b", BlockSize: 4096, PaddedVocab: 50688, Layers: 16, Heads: 32, Embd: 4096, RotaryPercentage: 0.25,
			ParallelResidual: true, Bias: true, Norm: "LayerNorm", MLP: "GptNeoxMLP", Intermediate: 16384, GeluApproximate: "none"},
		{Name: "Llama-2-7b-hf", BlockSize: 4096, PaddedVocab: 32000, Layers: 32, Heads: 32, Embd: 4096, RotaryPercentage: 1,
			Norm: "RMSNorm", MLP: "LLaMAMLP", Intermediate: 11008},
		{Name: "Llama-2-13b-hf", BlockSize: 4096, PaddedVocab: 32000, Layers: 40, Heads: 40, Embd: 5120, RotaryPercentage: 1,
			Norm: "RMSNorm", MLP: "LLaMAMLP", Intermediate: 13824},
		// falcon-40b: new decoder architecture (two norms), 8 query groups
		{Name: "falcon-40b", BlockSize: 2048, PaddedVocab: 65024, Layers: 60, Heads: 128, QueryGroups: 8, Embd: 8192, RotaryPercentage: 1,
			ParallelResidual: true, Norm: "LayerNorm", MLP: "GptNeoxMLP", Intermediate: 32768, GeluApproximate: "none"},
	}
}

// Lookup finds a config by checkpoint name.
func Lookup(name string) (Config, error) {
	var names []string
	for _, c := range Configs() {
		if c.Name == name {
			return c, nil
		}
		names = append(names, c.Name)
	}
	return Config{}, fmt.Errorf("unknown LitGPT checkpoint %q (known: %s)", name, strings.Join(names, ", "))
}

func (c Config) groups() int64 {
	if c.QueryGroups > 0 {
		return c.QueryGroups
	}
	return c.Heads
}

func (c Config) headSize() int64 { return c.Embd / c.Heads }

func (c Config) qkvWidth() int64 { return (c.Heads + 2*c.groups()) * c.headSize() }

func (c Config) ropeElems() int64 { return int64(c.RotaryPercentage * float64(c.headSize())) }

func (c Config) chunk() int64 {
	if c.LMHeadChunk > 0 {
		return c.LMHeadChunk
	}
	return 128
}

func (c Config) adapterStart() int64 {
	if c.AdapterStartLayer > 0 {
		return c.AdapterStartLayer
	}
	return 2
}

func (c Config) promptLength() int64 {
	if c.AdapterPromptLength > 0 {
		return c.AdapterPromptLength
	}
	return 10
}

// New builds the model: wte, the blocks, ln_f and the chunked head.
func New(c Config) (*core.Model, error) {
	if c.Embd <= 0 || c.Heads <= 0 || c.Layers <= 0 || c.PaddedVocab <= 0 || c.Intermediate <= 0 {
		return nil, &units.Error{Path: c.Name, Msg: "litgpt: embd, heads, layers, padded vocab and intermediate size must be positive"}
	}
	if c.Embd%c.Heads != 0 || c.Heads%c.groups() != 0 {
		return nil, units.Errorf(c.Name, "litgpt: heads must divide embd and query groups must divide heads (embd=%d, heads=%d, groups=%d)", c.Embd, c.Heads, c.groups())
	}
	switch c.Adapter {
	case "", "v1", "v2":
	default:
		return nil, units.Errorf(c.Name, "litgpt: unknown adapter %q (known: v1, v2)", c.Adapter)
	}
	layers := []core.Layer{&nn.Embedding{Name: "wte", Rows: c.PaddedVocab, Dim: c.Embd}}
	if c.Adapter == "" {
		layers = append(layers, &core.Repeat{Name: "h", Layer: &LitBlock{Config: c}, N: c.Layers})
	} else {
		blocks := make([]core.Layer, c.Layers)
		for i := range blocks {
			blocks[i] = &LitBlock{Name: core.Itoa(int64(i)), Config: c, Index: int64(i)}
		}
		layers = append(layers, &core.Sequential{Name: "h", Layers: blocks})
	}
	layers = append(layers, &LitNorm{Name: "ln_f", Config: c}, &LitHead{Config: c})
	return &core.Model{Name: c.Name, Layers: layers, Loss: "none", NativeLoRA: true}, nil
}

// LitBlock is lit_gpt.model.Block (with the LoRA or adapter attention
// when the plan or the config asks for it).
type LitBlock struct {
	Name   string
	Config Config
	Index  int64 // block index (adapter layers start at adapter_start_layer)
}

func (l *LitBlock) Kind() string           { return "litgpt_block" }
func (l *LitBlock) Label() string          { return l.Name }
func (l *LitBlock) Children() []core.Layer { return nil }
func (l *LitBlock) Summary() string {
	c := l.Config
	return fmt.Sprintf("dim %d, %d heads, %s, %s", c.Embd, c.Heads, c.Norm, c.MLP)
}
func (l *LitBlock) InDim() int64  { return l.Config.Embd }
func (l *LitBlock) OutDim() int64 { return l.Config.Embd }
func (l *LitBlock) Validate(path string) error {
	return core.Positive(path, "embd", l.Config.Embd)
}

// Params counts the block exactly (norms, attention, MLP, adapter).
func (l *LitBlock) Params() int64 {
	c := l.Config
	h := c.Embd
	norm := func() int64 {
		if c.Norm == "RMSNorm" {
			return h
		}
		return 2 * h
	}
	lin := func(in, out int64) int64 {
		n := in * out
		if c.Bias {
			n += out
		}
		if c.Adapter == "v2" {
			n += 2 * out // adapter_bias, adapter_scale
		}
		return n
	}
	n := norm() + lin(h, c.qkvWidth()) + lin(h, h)
	if !c.SharedAttentionNorm {
		n += norm()
	}
	if c.MLP == "LLaMAMLP" {
		n += 2*lin(h, c.Intermediate) + lin(c.Intermediate, h)
	} else {
		n += lin(h, c.Intermediate) + lin(c.Intermediate, h)
	}
	if c.Adapter != "" && l.Index >= c.adapterStart() {
		n += c.promptLength()*h + c.Heads // adapter_wte, gating_factor
	}
	return n
}

func (l *LitBlock) Lower(b *core.Builder, x core.Value) core.Value {
	c := l.Config
	if b.Last(x) != c.Embd {
		panic(core.ShapeMismatch(b, "litgpt_block", c.Embd, b.Last(x)))
	}
	defer b.Scope(l.Name)()
	n1 := litNorm(b, c, "norm_1", x)
	h := litAttention(b, c, l.Index, n1)
	if c.ParallelResidual {
		n2 := n1
		if !c.SharedAttentionNorm {
			n2 = litNorm(b, c, "norm_2", x)
		}
		m := litMLP(b, c, n2)
		return b.Add("residual_mlp", b.Add("residual_attn", x, h), m)
	}
	x = b.Add("residual_attn", x, h)
	m := litMLP(b, c, litNorm(b, c, "norm_2", x))
	return b.Add("residual_mlp", x, m)
}

// LitNorm is a LitGPT norm as a layer (ln_f).
type LitNorm struct {
	Name   string
	Config Config
}

func (n *LitNorm) Kind() string           { return "litgpt_norm" }
func (n *LitNorm) Label() string          { return n.Name }
func (n *LitNorm) Children() []core.Layer { return nil }
func (n *LitNorm) Summary() string        { return n.Config.Norm }
func (n *LitNorm) InDim() int64           { return n.Config.Embd }
func (n *LitNorm) OutDim() int64          { return n.Config.Embd }
func (n *LitNorm) Params() int64 {
	if n.Config.Norm == "RMSNorm" {
		return n.Config.Embd
	}
	return 2 * n.Config.Embd
}
func (n *LitNorm) Validate(path string) error { return core.Positive(path, "embd", n.Config.Embd) }
func (n *LitNorm) Lower(b *core.Builder, x core.Value) core.Value {
	return litNorm(b, n.Config, n.Name, x)
}

// litNorm lowers torch.nn.LayerNorm or lit_gpt's RMSNorm. Adapter v2
// trains the norm weights (adapter_filter: norm_1, norm_2, ln_f).
func litNorm(b *core.Builder, c Config, name string, x core.Value) core.Value {
	if c.Adapter == "v2" {
		if b.Ft == nil {
			b.Ft = &core.Finetune{}
		}
		b.Ft.Unfreeze++
		defer func() { b.Ft.Unfreeze-- }()
	}
	if c.Norm != "RMSNorm" {
		return b.LayerNorm(name, x, c.Embd, true)
	}
	defer b.Scope(name)()
	w := b.Param("weight", []int64{c.Embd}, core.RoleNorm)
	dt := b.Dtype(x)
	r := core.Rows(b.Shape(x))
	sq := b.Mul("x2", x, x) // x * x: saves x (both operands)
	im := b.AddOp("mean", "mean", []core.Value{sq})
	variance := b.Out(im, "norm_x", append(append([]int64(nil), b.Shape(x)[:len(b.Shape(x))-1]...), 1), dt, "mean of x² (RMSNorm)")
	if b.Rt.RMSNormSavesSquare {
		b.Save(im, sq) // MeanBackward1 keeps its input before torch 2.2 (pytorch#109876, fixed by #109935)
	}
	ie := b.AddOp("add", "eps", []core.Value{variance})
	ve := b.Out(ie, "norm_x_eps", b.Shape(variance), dt, "norm_x + eps")
	ir := b.AddOp("rsqrt", "rsqrt", []core.Value{ve})
	rs := b.Out(ir, "rsqrt", b.Shape(variance), dt, "rsqrt (saved)")
	b.Save(ir, rs)
	normed := b.Mul("x_normed", x, rs)
	iw := b.AddOp("mul", "scale", []core.Value{normed}, w)
	y := b.Out(iw, "out", b.Shape(x), core.Promote(dt, b.Prec.Params), "RMSNorm output")
	if b.Trainable(w) {
		b.Save(iw, normed)
	}
	b.Op(iw).Flops = 4 * float64(r*c.Embd)
	return y
}

// litLinear is nn.Linear, or AdapterV2Linear (adapter_scale * (linear(x) +
// adapter_bias), both trainable, so the product keeps linear(x) + bias for
// the scale's gradient) when the config uses adapter v2.
func litLinear(b *core.Builder, c Config, name string, role core.Role, x core.Value, in, out int64, bias bool) core.Value {
	if c.Adapter != "v2" {
		return b.Linear(name, role, x, in, out, bias)
	}
	defer b.Scope(name)()
	y := b.Linear("linear", role, x, in, out, bias)
	ab := b.AdapterParam("adapter_bias", []int64{out}, core.RoleAdapter)
	as := b.AdapterParam("adapter_scale", []int64{out}, core.RoleAdapter)
	ia := b.AddOp("add", "add_bias", []core.Value{y}, ab)
	s := b.Out(ia, "biased", b.Shape(y), b.Dtype(y), "linear(x) + adapter_bias")
	im := b.AddOp("mul", "scale", []core.Value{s}, as)
	z := b.Out(im, "scaled", b.Shape(y), b.Dtype(y), "adapter_scale * (linear(x) + adapter_bias)")
	b.Save(im, s)
	return z
}

// litAttention lowers CausalSelfAttention (with LoRA on the fused qkv, or
// the adapter prefix attention).
func litAttention(b *core.Builder, c Config, index int64, x core.Value) core.Value {
	defer b.Scope("attn")()
	h, hs, nh, g := c.Embd, c.headSize(), c.Heads, c.groups()
	s := b.Shape(x)
	lora := b.Lora
	if lora != nil {
		b.Lora = &core.LoRA{Rank: lora.Rank} // base still frozen; LitGPT's own fused LoRA below, not the per-projection one
	}
	wqkv := int32(len(b.P.Params)) // the qkv weight registers first
	qkv := litLinear(b, c, "attn", core.RoleQKV, x, h, c.qkvWidth(), c.Bias)
	b.Lora = lora
	if lora != nil {
		qkv = litLoRAQKV(b, c, x, qkv)
	}
	// q, k: rope on the first rope_n_elem channels of each head, then cat
	// back to full heads (new tensors); v stays a view of qkv unless GQA
	// expands it (k.expand(...).reshape copies).
	q := litRope(b, "q", qkv, core.WithLast(s, nh*hs), nh*c.ropeElems())
	var src = qkv
	if g != nh {
		e := b.AddOp("repeat_kv", "expand_k", []core.Value{qkv})
		src = b.Out(e, "k_expanded", core.WithLast(s, nh*hs), b.Dtype(qkv), "k expanded to all heads (expand + reshape copy)")
	}
	k := litRope(b, "k", src, core.WithLast(s, nh*hs), nh*c.ropeElems())
	v := qkv
	if g != nh {
		e := b.AddOp("repeat_kv", "expand_v", []core.Value{qkv})
		v = b.Out(e, "v_expanded", core.WithLast(s, nh*hs), b.Dtype(qkv), "v expanded to all heads (expand + reshape copy)")
	}
	attn := &nn.Attention{Dim: h, Heads: nh, HeadDim: hs, Impl: "flash", Causal: true}
	y := attn.Fused(b, q, k, v, s)
	if c.Adapter != "" && index >= c.adapterStart() {
		y = litAdapterPrefix(b, c, q, y, wqkv)
	}
	return litLinear(b, c, "proj", core.RoleO, y, nh*hs, h, c.Bias)
}

// litRope is apply_rope on the first n channels of each head plus the cat
// back to full heads: -x2 and the rotated cat in bf16, x*cos, rotated*sin
// and their sum in fp32 (the cos/sin buffers are fp32), .type_as(x); the
// products save only cos and sin (buffers).
func litRope(b *core.Builder, name string, src core.Value, shape []int64, n int64) core.Value {
	i := b.AddOp("rope", "rope_"+name, []core.Value{src})
	dt := b.Dtype(src)
	y := b.Out(i, name, shape, dt, name+" with rotary embeddings (cat of the roped and the pass-through channels)")
	elems := core.Rows(shape) * n
	// rotated (dt) + x*cos, rotated*sin, sum (fp32) + the roped slice (dt)
	b.Op(i).WorkF = 2*dt.Bytes(elems) + 3*units.FP32.Bytes(elems)
	b.Op(i).WorkB = 3*units.FP32.Bytes(elems) + dt.Bytes(elems)
	b.Op(i).Flops = 6 * float64(elems)
	return y
}

// litLoRAQKV is LoRAQKVLinear's update added to the pretrained qkv output:
// lora_A over dropout(x), grouped conv1d with lora_B, zero_pad into the
// qkv width (when not all of q, k, v are enabled), * scaling, + pretrained.
func litLoRAQKV(b *core.Builder, c Config, x, pretrained core.Value) core.Value {
	defer b.Scope("lora")()
	l := b.Lora
	h, hs := c.Embd, c.headSize()
	kvEmbd := c.groups() * hs
	var nEnabled, width int64
	for _, part := range []struct {
		role core.Role
		w    int64
	}{{core.RoleQ, h}, {core.RoleK, kvEmbd}, {core.RoleV, kvEmbd}} {
		if litTargets(l, part.role) {
			nEnabled++
			width += part.w
		}
	}
	if nEnabled == 0 {
		return pretrained
	}
	s := b.Shape(x)
	r := l.Rank
	xd := b.Dropout("lora_dropout", x, l.Dropout)
	a := b.AdapterLinear("lora_A", xd, h, r*nEnabled)
	// conv1d(after_A.transpose(-2, -1), lora_B.unsqueeze(-1), groups=n):
	// saves its input (a view of after_A) and the weight.
	wb := b.AdapterParam("lora_B", []int64{width, r}, core.RoleLoRA)
	ic := b.AddOp("conv1d", "lora_B", []core.Value{a}, wb)
	after := b.Out(ic, "after_B", core.WithLast(s, width), b.Dtype(a), "LoRA lora_B output (grouped conv1d)")
	b.Save(ic, a)
	b.Op(ic).Flops = 2 * float64(core.Rows(s)) * float64(r) * float64(width)
	upd := after
	if nEnabled < 3 {
		// zero_pad: x.reshape(-1, width) copies the transposed conv output
		// when the batch is not 1; index_copy into new_zeros keeps that
		// source and the index (torch.tensor(lora_ind) made each forward).
		src := after
		if b.Batch > 1 {
			cp := b.AddOp("contiguous", "reshape", []core.Value{after})
			src = b.Out(cp, "source", core.WithLast(s, width), b.Dtype(after), "reshape copy of the transposed LoRA update (zero_pad)")
		}
		ii := b.AddOp("tensor", "lora_ind", nil)
		idx := b.Out(ii, "lora_ind", []int64{width}, units.INT64, "index of the enabled q/k/v columns (torch.tensor, made each forward)")
		b.Val(idx).Grad = false
		ix := b.AddOp("index_copy", "zero_pad", []core.Value{src, idx})
		upd = b.Out(ix, "padded", core.WithLast(s, c.qkvWidth()), b.Dtype(after), "LoRA update zero-padded to the qkv width")
		b.Save(ix, src, idx)
		b.Op(ix).WorkF = b.Dtype(after).Bytes(core.Rows(s) * c.qkvWidth()) // new_zeros
	}
	im := b.AddOp("mul", "scaling", []core.Value{upd})
	scaled := b.Out(im, "scaled", b.Shape(upd), b.Dtype(upd), "LoRA update * alpha/r")
	return b.Add("lora_sum", pretrained, scaled)
}

// litAdapterPrefix is adapter v1's attention over the learned prefix:
// ak, av from self.attn(adapter_wte) (aT rows), SDPA of q against them
// with a bool mask (not flash: memory-efficient attention), then
// y + gating_factor * ay (the product keeps ay for the gate's gradient).
func litAdapterPrefix(b *core.Builder, c Config, q, y core.Value, wqkv int32) core.Value {
	defer b.Scope("adapter")()
	h, aT := c.Embd, c.promptLength()
	wte := b.AdapterParam("adapter_wte", []int64{aT, h}, core.RoleAdapter)
	gate := b.AdapterParam("gating_factor", []int64{1, 1, c.Heads, 1}, core.RoleAdapter)
	ip := b.AddOp("prefix", "prefix", nil, wte)
	prefix := b.Out(ip, "prefix", []int64{1, aT, h}, b.Prec.Params, "adapter prompt (adapter_wte.weight as a batch)")
	// self.attn(prefix): the block's own (frozen) qkv weight on aT rows
	params := []int32{wqkv}
	if c.Bias {
		params = append(params, wqkv+1)
	}
	il := b.AddOp("matmul", "prefix_qkv", []core.Value{prefix}, params...)
	aqkv := b.Out(il, "aqkv", []int64{1, aT, c.qkvWidth()}, b.Prec.Compute, "qkv of the adapter prompt")
	b.Op(il).Flops = 2 * float64(aT) * float64(h) * float64(c.qkvWidth())
	s := b.Shape(q)
	ia := b.AddOp("attention", "adapter_attention", []core.Value{q, aqkv})
	ay := b.Out(ia, "ay", b.Shape(y), b.Dtype(y), "attention of the tokens over the adapter prompt")
	lse := b.Out(ia, "logsumexp", []int64{core.Rows(s), c.Heads}, units.FP32, "adapter attention logsumexp (saved)")
	b.Val(lse).Grad = false
	b.Save(ia, q, aqkv, ay, lse)
	b.Op(ia).Flops = 4 * float64(core.Rows(s)) * float64(aT) * float64(h)
	ig := b.AddOp("mul", "gate", []core.Value{ay}, gate)
	gated := b.Out(ig, "gated", b.Shape(y), b.Dtype(y), "gating_factor * ay")
	b.Save(ig, ay)
	return b.Add("adapter_sum", y, gated)
}

// litMLP lowers GptNeoxMLP (fc, gelu, proj) or LLaMAMLP (fc_1, fc_2,
// silu(fc_1) * fc_2, proj).
func litMLP(b *core.Builder, c Config, x core.Value) core.Value {
	defer b.Scope("mlp")()
	h, n := c.Embd, c.Intermediate
	if c.MLP == "LLaMAMLP" {
		f1 := litLinear(b, c, "fc_1", core.RoleGate, x, h, n, c.Bias)
		f2 := litLinear(b, c, "fc_2", core.RoleUp, x, h, n, c.Bias)
		m := b.Mul("act_mul", nn.Activation(b, "silu", f1), f2)
		return litLinear(b, c, "proj", core.RoleDown, m, n, h, c.Bias)
	}
	f := litLinear(b, c, "fc", core.RoleUp, x, h, n, c.Bias)
	return litLinear(b, c, "proj", core.RoleDown, nn.Activation(b, "gelu", f), n, h, c.Bias)
}

// litTargets reports whether LoRA adapts the q, k or v part of the fused
// projection (to_query, to_key, to_value).
func litTargets(l *core.LoRA, part core.Role) bool {
	for _, t := range l.Targets {
		if core.Role(t) == part || t == "qkv" || t == "all-linear" {
			return true
		}
	}
	return false
}
