package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// V4Attention is DeepSeek-V4's attention (DeepseekV4Attention,
// models/deepseek_v4/modeling_deepseek_v4.py at transformers 5.25.0): a
// low-rank query, one shared key-and-value head (multi-query, K = V),
// partial interleaved rope on the last RopeDim of each head, a learned
// sink logit per head, a grouped low-rank output projection and, on
// compressed layers, the compressed entries of Compressor appended to the
// keys:
//
//	qr = q_a_norm(q_a_proj(x))                    # [T, q_lora_rank], q_a_norm kept fp32
//	q = rope(unweighted_rms(q_b_proj(qr)))        # [B, heads, S, head_dim]
//	kv = rope(kv_norm(kv_proj(x)))                # [B, 1, S, head_dim], kv_norm kept fp32
//	kv = cat(kv, compressor(x, qr))               # [B, 1, S + C, head_dim] on CSA and HCA layers
//	o = eager attention with sinks, the sliding-window mask and the compressor's block bias
//	o = rope(o, -sin)                             # the values' rope undone
//	out = o_b_proj(o_a_proj(o viewed as o_groups groups))   # grouped low rank
//
// transformers runs it eagerly only (_supports_sdpa and
// _supports_flash_attn are False: SDPA has no sink, flash-attn no 512-wide
// head): the whole [B, heads, S, S + C] score matrix is built and masked,
// and the sliding window saves no memory. The shared head is expanded to
// the heads as a stride-0 view (repeat_kv of one head), which bmm copies
// when the batch is above one.
type V4Attention struct {
	Name       string
	Dim        int64 // hidden_size
	Heads      int64
	HeadDim    int64 // head_dim (512)
	RopeDim    int64 // qk_rope_head_dim: head_dim x partial_rotary_factor
	QLoraRank  int64
	OGroups    int64 // o_groups
	OLoraRank  int64 // o_lora_rank
	Window     int64 // sliding_window
	Compressor *KVCompressor
}

func (a *V4Attention) Kind() string           { return "v4_attention" }
func (a *V4Attention) Label() string          { return a.Name }
func (a *V4Attention) DefaultName() string    { return "attn" }
func (a *V4Attention) Children() []core.Layer { return nil }
func (a *V4Attention) InDim() int64           { return a.Dim }
func (a *V4Attention) OutDim() int64          { return a.Dim }

// Params: q_a_proj, q_a_norm, q_b_proj, kv_proj, kv_norm, o_a_proj,
// o_b_proj, sinks and the compressor's.
func (a *V4Attention) Params() int64 {
	h, d := a.Heads, a.HeadDim
	n := a.Dim*a.QLoraRank + a.QLoraRank + a.QLoraRank*h*d
	n += a.Dim*d + d
	n += h*d*a.OLoraRank + a.OGroups*a.OLoraRank*a.Dim
	n += h
	if a.Compressor != nil {
		n += a.Compressor.params(a.Dim, a.QLoraRank)
	}
	return n
}

func (a *V4Attention) Summary() string {
	s := fmt.Sprintf("dim %d, %d heads x %d (rope %d), one kv head, q rank %d, %d output groups of %d, window %d, eager",
		a.Dim, a.Heads, a.HeadDim, a.RopeDim, a.QLoraRank, a.OGroups, a.OLoraRank, a.Window)
	if c := a.Compressor; c != nil {
		s += ", " + c.summary()
	}
	return s
}

func (a *V4Attention) Validate(path string) error {
	for _, f := range []struct {
		name string
		n    int64
	}{{"dim", a.Dim}, {"heads", a.Heads}, {"head dim", a.HeadDim}, {"rope dim", a.RopeDim}, {"q rank", a.QLoraRank},
		{"output groups", a.OGroups}, {"output rank", a.OLoraRank}, {"window", a.Window}} {
		if err := core.Positive(path, f.name, f.n); err != nil {
			return err
		}
	}
	if a.RopeDim > a.HeadDim || a.RopeDim%2 != 0 {
		return units.Errorf(path, "the rope dim (%d) must be even and at most the head dim (%d)", a.RopeDim, a.HeadDim)
	}
	if (a.Heads*a.HeadDim)%a.OGroups != 0 {
		return units.Errorf(path, "%d output groups do not divide the %d heads x %d", a.OGroups, a.Heads, a.HeadDim)
	}
	if a.Compressor != nil {
		return a.Compressor.validate(path, a.RopeDim)
	}
	return nil
}

// CheckLayout: modelled on one rank's heads and sequence only.
func (a *V4Attention) CheckLayout(path string, par core.Parallelism) error {
	return checkNoTPCP(path, par, "DeepSeek-V4's attention and compressors")
}

// CheckPacking: eager attention has no varlen path.
func (a *V4Attention) CheckPacking(path string, _ core.Packing) error {
	return fmt.Errorf("%s runs eager attention (DeepSeek-V4 has no flash path)", path)
}

func (a *V4Attention) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != a.Dim {
		panic(core.ShapeMismatch(b, "v4_attention", a.Dim, b.Last(x)))
	}
	defer b.Scope(b.ModuleName(a))()
	s := b.Shape(x)
	dt := b.Dtype(x)
	seq := s[len(s)-2]
	batch := core.Rows(s) / seq
	h, d := a.Heads, a.HeadDim
	qa := b.Linear("q_a_proj", core.RoleQ, x, a.Dim, a.QLoraRank, false)
	qr := keptNorm(b, "q_a_norm", qa, a.QLoraRank)
	q := b.Linear("q_b_proj", core.RoleQ, qr, a.QLoraRank, h*d, false)
	q = headRMSNorm(b, q, h)
	// DeepseekV4Model makes both pairs once a forward and hands both to
	// every layer (a checkpointed layer holds both); sliding layers read
	// "main", compressed ones "compress".
	cos, other := v4RopeTables(b, "main", dt, seq, a.RopeDim), v4RopeTables(b, "compress", dt, seq, a.RopeDim)
	if a.Compressor != nil {
		cos, other = other, cos
	}
	b.KeepAlive("position_embeddings", other...)
	q = v4Rope(b, "q", q, cos, seq, a.RopeDim, 1)
	kv := keptNorm(b, "kv_norm", b.Linear("kv_proj", core.RoleK, x, a.Dim, d, false), d)
	kv = v4Rope(b, "kv", kv, cos, seq, a.RopeDim, 1)
	keys := seq
	var bias core.Value = core.NoValue
	if c := a.Compressor; c != nil {
		var comp core.Value
		comp, bias = c.lower(b, x, qr, a.Dim, a.QLoraRank, a.RopeDim, batch, seq)
		if comp != core.NoValue {
			keys += c.entries(seq)
			kv = b.Ew("cat", "kv_with_compressed", []core.Value{kv, comp}, []int64{batch, keys, d}, dt, "the sliding keys and the compressed entries (torch.cat on the key axis)")
		}
	}
	o := a.eager(b, q, kv, bias, batch, seq, keys, dt)
	o = v4Rope(b, "o", o, cos, seq, a.RopeDim, 1) // cos, -sin: the conjugate rotation
	// o.reshape(.., g, -1): the rope's output is head major, so the view
	// [B, S, g, heads x d / g] is a copy; o_a_proj's bmm keeps it.
	g, per := a.OGroups, h*d/a.OGroups
	grouped := b.Ew("reshape", "grouped", []core.Value{o}, core.WithLast(s, h*d), dt, "the heads regrouped into o_groups (reshape of a transposed tensor: a copy)")
	done := b.Scope("o_a_proj")
	w := b.Param("weight", []int64{g * a.OLoraRank, per}, core.RoleO)
	i := b.AddOp("matmul", "", []core.Value{grouped}, w) // a bmm over the groups
	ya := b.Out(i, "o_a_out", core.WithLast(s, g*a.OLoraRank), dt, "each group projected to o_lora_rank (bmm)")
	if b.Trainable(w) {
		b.Save(i, grouped)
	}
	b.Op(i).Flops = 2 * float64(core.Rows(s)) * float64(per) * float64(g*a.OLoraRank)
	b.Op(i).Bytes += float64(b.Val(grouped).Bytes) + float64(dt.Bytes(g*a.OLoraRank*per))
	ya = a.oaLoRA(b, grouped, ya, per)
	done()
	flat := b.Ew("flatten", "o_a_flat", []core.Value{ya}, core.WithLast(s, g*a.OLoraRank), dt, "the groups flattened (flatten(2) of the transposed bmm output: a copy)")
	return b.Linear("o_b_proj", core.RoleO, flat, g*a.OLoraRank, a.Dim, false)
}

// eager lowers eager_attention_forward with one key-and-value head and
// sinks: q [B, S, heads x d] (head major after the rope's cat), kv [B, L,
// d] read as both keys and values, bias the compressor's [B, 1, S, C]
// block bias joined to the sliding-window mask (NoValue on sliding
// layers). Returns the context [B, S, heads x d], head major (the rope
// that follows reads it transposed).
func (a *V4Attention) eager(b *core.Builder, q, kv, bias core.Value, batch, seq, keys int64, dt units.DType) core.Value {
	h, d := a.Heads, a.HeadDim
	rows := batch * seq
	scoreShape := []int64{batch, h, seq, keys}
	mask := v4SlidingMask(b, batch, seq, a.Window, dt)
	if bias != core.NoValue {
		m := b.AddOp("cat", "mask_with_block_bias", []core.Value{mask, bias})
		mask = b.Out(m, "mask_with_block_bias", []int64{batch, 1, seq, keys}, dt, "the sliding mask and the compressor's block bias (torch.cat)")
		b.Val(mask).Grad = false
	}
	// repeat_kv of one head is a stride-0 view; each matmul folds (batch,
	// heads) by reshape, which copies every head when batch > 1 (k^T for
	// q.k, v for p.v: two copies), and is a view of kv with one sequence.
	expanded := func(name string) core.Value {
		if batch == 1 {
			return kv
		}
		c := b.AddOp("expand", name, []core.Value{kv})
		return b.Out(c, name, []int64{batch * h, keys, d}, dt, "the shared key-value head expanded to every head (matmul's reshape of a stride-0 view copies)")
	}
	kT := expanded("k_expanded")
	i := b.AddOp("matmul", "qk", []core.Value{q, kT})
	scores := b.Out(i, "scores", scoreShape, dt, "attention scores")
	saveProduct(b, i, q, kT)
	b.Op(i).Flops = 2 * float64(rows) * float64(keys) * float64(h*d)
	scaled := b.Ew("mul", "scaled", []core.Value{scores}, scoreShape, dt, "scores * head_dim^-0.5")
	masked := b.Ew("add", "masked", []core.Value{scaled, mask}, scoreShape, dt, "scores plus the mask")
	// cat([scores, sinks]): promoted to the sinks' fp32; minus the row
	// max (max(dim=-1) keeps its indices); softmax in that dtype, saved.
	probShape := []int64{batch, h, seq, keys + 1}
	sink := fp32Param(b, "sinks", []int64{h}, core.RoleO)
	c := b.AddOp("cat", "sinks", []core.Value{masked}, sink)
	sdt := core.Promote(dt, units.FP32)
	if b.Prec.Params == units.FP32 || b.Prec.Autocast {
		sdt = units.FP32
	}
	combined := b.Out(c, "combined_logits", probShape, sdt, "scores with the sink column")
	mx := b.AddOp("max", "row_max", []core.Value{combined})
	rowMax := b.Out(mx, "row_max", []int64{batch, h, seq, 1}, sdt, "each row's max logit")
	idx := b.Out(mx, "row_max_indices", []int64{batch, h, seq, 1}, units.INT64, "the row max's indices (saved by max(dim=-1))")
	b.Save(mx, idx)
	shifted := b.Ew("sub", "shifted", []core.Value{combined, rowMax}, probShape, sdt, "logits minus the row max")
	sm := b.AddOp("softmax", "softmax", []core.Value{shifted})
	p := b.Out(sm, "probs", probShape, sdt, "attention probabilities with the sink (saved)")
	b.Save(sm, p)
	b.Op(sm).Bytes += float64(b.Val(shifted).Bytes)
	if !b.Rt.CPU {
		b.Op(sm).WorkB = b.Val(p).Bytes // CUDA's softmax backward: grad * output first
	}
	// probs[..., :-1].to(v.dtype): a copy in a 16-bit model; in fp32 a
	// view of probs (its reshape for bmm merges batch and heads: a view).
	pv := p
	if sdt != dt {
		pv = b.Ew("cast", "probs_cast", []core.Value{p}, scoreShape, dt, "the probabilities without the sink, in the values' dtype")
	}
	v := expanded("v_expanded")
	o := b.AddOp("matmul", "pv", []core.Value{pv, v})
	ctx := b.Out(o, "context", []int64{batch, seq, h * d}, dt, "attention context")
	saveProduct(b, o, pv, v)
	b.Op(o).Flops = 2 * float64(rows) * float64(keys) * float64(h*d)
	return b.Ew("contiguous", "merge_heads", []core.Value{ctx}, []int64{batch, seq, h * d}, dt, "attn_output.transpose(1, 2).contiguous()")
}

// v4SlidingMask is create_sliding_window_causal_mask's eager mask, made
// once a forward and handed to every layer: [B, 1, S, S] in dt.
func v4SlidingMask(b *core.Builder, batch, seq, window int64, dt units.DType) core.Value {
	key := fmt.Sprintf("v4_sliding_mask.%s.%dx%d.%d", dt.Name(), batch, seq, window)
	if v, ok := b.SharedValue(key); ok {
		return v
	}
	i := b.AddOp("mask", "attention_mask", nil)
	y := b.Out(i, "attention_mask", []int64{batch, 1, seq, seq}, dt, "the sliding-window causal mask made once a forward (eager: additive, the activations' dtype)")
	b.Val(y).Grad = false
	b.Op(i).NoGradB = true
	b.Share(key, y)
	b.OutsideRegions(i)
	return y
}

// v4RopeTables are DeepseekV4Model's position_embeddings[kind] ("main"
// or "compress"): cos and sin [1, S, rope / 2] in dt, made once a
// forward.
func v4RopeTables(b *core.Builder, kind string, dt units.DType, seq, ropeDim int64) []core.Value {
	return forwardTables(b, "rotary_emb."+kind, dt, []int64{1, seq, ropeDim / 2}, "cos", "sin")
}

// v4Rope lowers apply_rotary_pos_emb on x [.., S, width]: cos and sin
// repeat_interleave'd to the rope dim (new tensors, which the products
// keep), the trailing rope slice rotated in fp32, cast back and
// concatenated with the rest: a new tensor of x's shape and dtype.
// tableRows is the tables' leading dimension (1, or the batch for the
// compressors' positions).
func v4Rope(b *core.Builder, name string, x core.Value, tables []core.Value, seq, ropeDim, tableRows int64) core.Value {
	r := b.AddOp("repeat_interleave", name+"_cos_sin", tables)
	cos := b.Out(r, name+"_cos", []int64{tableRows, seq, ropeDim}, b.Dtype(tables[0]), "cos repeat_interleave'd to the rope dim")
	sin := b.Out(r, name+"_sin", []int64{tableRows, seq, ropeDim}, b.Dtype(tables[0]), "sin repeat_interleave'd to the rope dim")
	b.Val(cos).Grad, b.Val(sin).Grad = false, false
	b.Op(r).NoGradB = true
	i := b.AddOp("rope", "rope_"+name, []core.Value{x, cos, sin})
	y := b.Out(i, name+"_rot", b.Shape(x), b.Dtype(x), "rotary-embedded "+name+" (the roped slice cat with the rest)")
	if b.Grad(x) {
		b.Save(i, cos, sin)
	}
	per := units.FP32.Bytes(core.Numel(b.Shape(x)) / b.Last(x) * ropeDim)
	b.Op(i).WorkF = 3 * per // rope.float(), rotate_half's stack and one product live at once
	b.Op(i).WorkB = 2 * per
	b.Op(i).Flops = 6 * float64(core.Numel(b.Shape(x))/b.Last(x)*ropeDim)
	return y
}

// headRMSNorm is q_b_norm, DeepseekV4UnweightedRMSNorm over each of the
// heads of q: x * rsqrt(x.float().square().mean(-1) + eps).to(x.dtype),
// which keeps x.float() (square), the fp32 rsqrt and its cast and x.
func headRMSNorm(b *core.Builder, x core.Value, heads int64) core.Value {
	s := b.Shape(x)
	d := s[len(s)-1] / heads
	x32 := b.Cast(x, units.FP32, "q.float() for q_b_norm")
	rows := core.Rows(s) * heads
	ip := b.AddOp("pow", "square", []core.Value{x32})
	sq := b.Out(ip, "x2", s, units.FP32, "x² in q_b_norm")
	b.Save(ip, x32)
	ms := b.Ew("mean", "mean", []core.Value{sq}, []int64{rows, 1}, units.FP32, "mean of x² per head")
	ir := b.AddOp("rsqrt", "rsqrt", []core.Value{ms})
	rs := b.Out(ir, "rsqrt", []int64{rows, 1}, units.FP32, "rsqrt(mean of x² + eps), saved by rsqrt")
	b.Save(ir, rs)
	rc := b.Cast(rs, b.Dtype(x), "the rsqrt in q's dtype")
	i := b.AddOp("mul", "q_b_norm", []core.Value{x, rc})
	y := b.Out(i, "q_normed", s, b.Dtype(x), "q normalised per head")
	b.Save(i, x, rc)
	b.Op(i).Flops = float64(core.Numel(s)) * float64(d) / float64(d)
	return y
}

// keptNorm is DeepseekV4RMSNorm kept in fp32 (_keep_in_fp32_modules_strict:
// q_a_norm, kv_norm, input_layernorm, post_attention_layernorm, norm):
// (weight * x.float() * rsqrt(..)).to(x.dtype).
func keptNorm(b *core.Builder, name string, x core.Value, dim int64) core.Value {
	defer b.Scope(name)()
	w := fp32Param(b, "weight", []int64{dim}, core.RoleNorm)
	x32 := b.Cast(x, units.FP32, "fp32 copy of the input of "+name)
	return fp32RMSNormOf(b, w, x32, dim, normWeightAsIs, name, b.Dtype(x))
}

// KeptNorm is the decoder's DeepseekV4RMSNorm as a layer (keptNorm).
type KeptNorm struct {
	Name string
	Dim  int64
}

func (n *KeptNorm) Kind() string               { return "rms_norm_fp32" }
func (n *KeptNorm) Label() string              { return n.Name }
func (n *KeptNorm) DefaultName() string        { return "norm" }
func (n *KeptNorm) Children() []core.Layer     { return nil }
func (n *KeptNorm) InDim() int64               { return n.Dim }
func (n *KeptNorm) OutDim() int64              { return n.Dim }
func (n *KeptNorm) Params() int64              { return n.Dim }
func (n *KeptNorm) Summary() string            { return fmt.Sprintf("%d, weight kept fp32", n.Dim) }
func (n *KeptNorm) Validate(path string) error { return core.Positive(path, "dim", n.Dim) }
func (n *KeptNorm) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != n.Dim {
		panic(core.ShapeMismatch(b, "rms_norm_fp32", n.Dim, b.Last(x)))
	}
	return keptNorm(b, b.ModuleName(n), x, n.Dim)
}

// oaLoRA is PEFT's lora.Linear on o_a_proj when LoRA targets it (in its
// scope; all-linear does: DeepseekV4GroupedLinear is an nn.Linear
// subclass, weight [o_groups x o_lora_rank, heads x head_dim / o_groups],
// modeling_deepseek_v4.py at transformers 5.25.0). lora.Linear adds
// lora_B(lora_A(x)) to the module's output: over the grouped input
// [.., o_groups, per] it is [.., o_groups, o_groups x o_lora_rank]
// against the bmm's [.., o_groups, o_lora_rank], which PyTorch cannot
// add when o_groups > 1 (peft 0.21.2's forward raises "The size of
// tensor a (16) must match the size of tensor b (32) at non-singleton
// dimension 3" on deepseek-v4-tiny.json): refused then. With one group
// the shapes agree and the adapter is lowered.
func (a *V4Attention) oaLoRA(b *core.Builder, grouped, ya core.Value, per int64) core.Value {
	if !b.LoRAAdapts(core.RoleO) {
		return ya
	}
	if a.OGroups > 1 {
		panic(core.LowerError{Err: &units.Error{Path: b.Name(""), Msg: fmt.Sprintf("lora: PEFT's lora.Linear on o_a_proj (a grouped nn.Linear of %d groups) adds an update %d groups x %d wide to the module's %d-wide output per group, and its forward fails (RuntimeError: the sizes must match)", a.OGroups, a.OGroups, a.OGroups*a.OLoraRank, a.OLoraRank),
			Hint: "name the modules to adapt without o_a_proj (all-linear reaches it), e.g. targets=[\"q_a_proj\", \"q_b_proj\", \"kv_proj\", \"o_b_proj\", \"gate_proj\", \"up_proj\", \"down_proj\"]"}})
	}
	return b.LoRAOutput(core.RoleO, grouped, ya, per, a.OGroups*a.OLoraRank)
}
