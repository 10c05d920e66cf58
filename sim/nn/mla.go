package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// MLA is multi-head latent attention (DeepSeek-V2/V3), as transformers'
// DeepseekV3Attention runs it:
//
//	q = q_b_proj(q_a_layernorm(q_a_proj(x)))      # or q_proj(x) without q_lora_rank
//	kv = kv_a_proj_with_mqa(x)                    # [T, kv_lora_rank + rope]: the latent and one shared rope key
//	k_nope, v = split(kv_b_proj(kv_a_layernorm(kv[:, :kv_lora_rank])))
//	q = cat(q_nope, rope(q_rope)); k = cat(k_nope, rope(k_rope) expanded to the heads)
//	o = attention(q, k, v)                        # flash pads v to the q/k head dim
//	o_proj(o)
//
// The compressed latent is what an inference KV cache keeps. Training
// keeps much more: autograd saves the full per-head keys and values the
// kernel reads (heads x (nope + rope) each for q and k, heads x v, or
// the q/k head dim under flash, whose padded value and output are saved),
// the kernel's output and the o_proj input, besides the small latents
// the projections keep.
type MLA struct {
	Name      string
	Dim       int64
	Heads     int64
	QLoraRank int64 // 0: a plain q_proj
	KVLora    int64 // kv_lora_rank
	Nope      int64 // qk_nope_head_dim
	RopeDim   int64 // qk_rope_head_dim
	VDim      int64 // v_head_dim
	// Bias: attention_bias, on q_a_proj, kv_a_proj_with_mqa and o_proj;
	// never on q_proj or q_b_proj (nn.Linear(..., bias=False) in every
	// MLA class of transformers 5.25.0: DeepseekV2Attention,
	// DeepseekV3Attention, MiniCPM3Attention, ...)
	Bias   bool
	Impl   string
	Causal bool
	// Indexer is DeepSeek Sparse Attention's lightning indexer
	// (DeepSeek-V3.2, GLM-5; mla_indexer.go), nil for none.
	Indexer *DSAIndexer
	// RopeTables names the rotary embedding whose tables, made once a
	// forward, every layer's rope saves (forwardTables): cos and sin,
	// [1, seq, qk_rope_head_dim] in the model's dtype (DeepSeek-V3's
	// apply_rotary_pos_emb and its _interleave, whose even and odd slices
	// keep the whole storages), or with RopeComplex DeepSeek-V2's one
	// complex64 freqs_cis of [1, seq, qk_rope_head_dim / 2], the bytes
	// of an fp32 [1, seq, qk_rope_head_dim] (apply_rotary_emb: the
	// complex product saves it alone). "" for none.
	RopeTables  string
	RopeComplex bool
	// NoRope: Kimi Linear's MLA (KimiLinearAttention, transformers 5.25.0:
	// "with NoPE"), which rotates nothing: q is the projection's output
	// viewed per head (no copy) and k the latent's nope part with the
	// qk_rope_head_dim slice of kv_a_proj_with_mqa's output unrotated,
	// shared by the heads. Under SDPA the kernel's output is sequence
	// major (CUDA's memory-efficient kernel always; the CPU's flash kernel
	// as its q is), so reshaping it for o_proj copies nothing.
	NoRope bool
	// HeadGate: Ling 3's output gate (BailingHybridAttention, 5.25.0): a
	// g_proj of one value a head, sigmoid in fp32 (which saves its
	// output), cast to the hidden state's dtype and multiplied into the
	// attention's output before o_proj (the product saves both).
	HeadGate bool
	// QGate: A.X-K2's fused query and output gate (AXK2Attention,
	// models/axk2/modular_axk2.py at 5.25.0): q_gate_proj, from
	// torch.cat of q_a_layernorm's output and q_a_proj's (2 x q_lora_rank
	// wide), gives each head qk_nope_head_dim + qk_rope_head_dim of q and
	// v_head_dim of a gate (no q_b_proj); the gate, reshaped (a copy) and
	// cast to fp32, goes through sigmoid (which saves its output) and
	// multiplies the attention's merged output (the product saves both,
	// fp32), cast back to the hidden state's dtype for o_proj. Needs
	// QLoraRank.
	QGate bool
	// LoraScale: LongCat-Flash's LoRA scaling (LongcatFlashMLA.forward,
	// modular_longcat_flash.py at 5.25.0): q's nope and rope parts times
	// sqrt(hidden / q_lora_rank) and the normed kv latent times
	// sqrt(hidden / kv_lora_rank), products by Python floats: new tensors,
	// nothing saved, kv_b_proj keeping the scaled latent.
	LoraScale bool
	// Dots: Dots 3 Note's latent attention (dots_mla.go): the normed
	// latents scaled, the rope key normed, the head gate in the
	// activations' dtype, a sliding window, fp32 rope tables.
	Dots DotsMLA
	// QPosScale: q (its nope and rotated parts concatenated) times a
	// scale of each position (Mistral4Attention.forward,
	// modular_mistral4.py at 5.25.0: get_llama_4_attn_scale from
	// rope_parameters' llama_4_scaling_beta; attention_qscale.go).
	QPosScale bool
}

func (a *MLA) qkDim() int64 { return a.Nope + a.RopeDim }

func (a *MLA) Kind() string           { return "mla" }
func (a *MLA) Label() string          { return a.Name }
func (a *MLA) DefaultName() string    { return "attn" }
func (a *MLA) Children() []core.Layer { return nil }
func (a *MLA) InDim() int64           { return a.Dim }
func (a *MLA) OutDim() int64          { return a.Dim }

func (a *MLA) Params() int64 {
	b := func(n int64) int64 {
		if a.Bias {
			return n
		}
		return 0
	}
	h, qk := a.Heads, a.qkDim()
	var n int64
	switch {
	case a.QGate:
		n += a.Dim*a.QLoraRank + b(a.QLoraRank) + a.QLoraRank + 2*a.QLoraRank*h*(qk+a.VDim)
	case a.QLoraRank > 0:
		n += a.Dim*a.QLoraRank + b(a.QLoraRank) + a.QLoraRank + a.QLoraRank*h*qk
	default:
		n += a.Dim * h * qk
	}
	n += a.Dim*(a.KVLora+a.RopeDim) + b(a.KVLora+a.RopeDim) + a.KVLora
	n += a.KVLora * h * (a.Nope + a.VDim)
	n += h*a.VDim*a.Dim + b(a.Dim)
	if a.HeadGate {
		n += a.Dim * h
	}
	if a.Dots.KRopeNorm {
		n += a.RopeDim
	}
	if a.Indexer != nil {
		n += a.Indexer.params(a.Dim, a.QLoraRank)
	}
	return n
}

func (a *MLA) Summary() string {
	s := fmt.Sprintf("dim %d, %d heads, q latent %d, kv latent %d, qk %d+%d, v %d, %s",
		a.Dim, a.Heads, a.QLoraRank, a.KVLora, a.Nope, a.RopeDim, a.VDim, a.Impl)
	if ix := a.Indexer; ix != nil {
		s += fmt.Sprintf(", indexer %d heads x %d, top %d", ix.Heads, ix.HeadDim, ix.TopK)
		if ix.Shared {
			s += " (shared: the previous full layer's)"
		}
	}
	return s
}

func (a *MLA) Validate(path string) error {
	if err := checkPositive(path, sized{FieldDim, a.Dim}, sized{FieldHeads, a.Heads}, sized{FieldKVLora, a.KVLora},
		sized{FieldNope, a.Nope}, sized{FieldRopeDim, a.RopeDim}, sized{FieldVDim, a.VDim}); err != nil {
		return err
	}
	if a.QLoraRank < 0 {
		return fieldErr(path, FieldQLora, fmt.Sprintf(" must be positive, or 0 for a plain q_proj (got %d)", a.QLoraRank))
	}
	if a.QGate && a.QLoraRank == 0 {
		return fieldErr(path, FieldQLora, " must be positive: A.X-K2's q_gate_proj reads the q latent")
	}
	if a.Indexer != nil {
		if err := a.Indexer.validate(path, a); err != nil {
			return err
		}
	}
	if err := a.Dots.validate(path, a.Impl); err != nil {
		return err
	}
	switch a.Impl {
	case "flash", "sdpa":
	case "eager":
		return fieldErr(path, "eager attention is not modelled for multi-head latent attention").withHint("use ", FieldImpl, `="sdpa" or "flash"`)
	default:
		return fieldErr(path, "unknown ", FieldImpl, fmt.Sprintf(" %q (known: flash, sdpa)", a.Impl))
	}
	return nil
}

// CheckLayout: tensor parallelism splits the heads (q_b_proj and
// kv_b_proj column-parallel, o_proj row-parallel; the latent projections
// are replicated), as Megatron's MLASelfAttention does.
func (a *MLA) CheckLayout(path string, par core.Parallelism) error {
	if tp := max(par.TP, 1); a.Heads%tp != 0 {
		return &units.Error{Path: path, Msg: fmt.Sprintf("tp=%d does not divide %d attention heads", tp, a.Heads)}
	}
	if n := par.Norm(); a.Indexer != nil && n.CP > 1 {
		return &units.Error{Path: path, Msg: fmt.Sprintf("cp=%d: context parallelism is not modelled for DeepSeek Sparse Attention (the indexer scores every query against every key)", n.CP),
			Hint: "use cp=1; transformers' DeepseekV32Attention has no context-parallel path"}
	}
	if n := par.Norm(); n.CPMode == "ulysses" && n.CP > 1 && (a.Heads/n.TP)%n.CP != 0 {
		return units.NewIntError(path, "cp=%d does not divide the %d attention heads of each tensor-parallel rank (Ulysses splits heads)",
			"Ulysses needs heads/tp divisible by cp; ring attention (cp_mode=\"ring\") has no such limit", n.CP, a.Heads/n.TP) // worded when read, as checkUlysses
	}
	return nil
}

// CheckPacking: packed documents need flash attention's varlen kernel.
func (a *MLA) CheckPacking(path string, _ core.Packing) error {
	if a.Impl != "flash" {
		return fmt.Errorf("%s runs %s attention", path, a.Impl)
	}
	return nil
}

func (a *MLA) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != a.Dim {
		panic(core.ShapeMismatch(b, "mla", a.Dim, b.Last(x)))
	}
	defer b.Scope(b.ModuleName(a))()
	tp := b.Par.Tpn()
	h, qk := a.Heads/tp, a.qkDim()
	xg := b.TpGather(x)
	s := b.Shape(xg)
	var q, qa core.Value
	if a.QGate {
		q, qa = a.qGate(b, xg, h)
	} else if a.QLoraRank > 0 {
		qa = b.Linear("q_a_proj", core.RoleQ, xg, a.Dim, a.QLoraRank, a.Bias)
		qa = b.RmsNorm("q_a_layernorm", qa, a.QLoraRank)
		qa = a.Dots.scaleQ(b, qa)
		q = b.ColLinear("q_b_proj", core.RoleQ, qa, qa, a.QLoraRank, a.Heads*qk, h*qk, false)
	} else {
		q = b.ColLinear("q_proj", core.RoleQ, x, xg, a.Dim, a.Heads*qk, h*qk, false)
	}
	kva := b.Linear("kv_a_proj_with_mqa", core.RoleK, xg, a.Dim, a.KVLora+a.RopeDim, a.Bias)
	kvn := a.Dots.kvLatent(b, kva, a.KVLora)
	if a.LoraScale {
		q = b.Ew("mul", "q_scaled", []core.Value{q}, b.Shape(q), b.Dtype(q), "q_pass and q_rot times mla_scale_q_lora")
		kvn = b.Ew("mul", "k_pass_scaled", []core.Value{kvn}, b.Shape(kvn), b.Dtype(kvn), "k_pass times mla_scale_kv_lora")
	}
	kvb := b.ColLinear("kv_b_proj", core.RoleV, kvn, kvn, a.KVLora, a.Heads*(a.Nope+a.VDim), h*(a.Nope+a.VDim), false)
	// rope on the split-off rope parts (views), then the concatenations
	// the kernel reads: new [T, heads, qk] tensors.
	dt := b.Dtype(q)
	if b.Prec.Autocast {
		dt = b.Prec.Compute
	}
	query, kr := q, kva
	if !a.NoRope {
		tables := a.ropeTables(b, s[len(s)-2])
		qr := rope(b, "q", q, core.WithLast(s, h*a.RopeDim), tables...)
		kr = rope(b, "k", a.Dots.ropeKey(b, kva, a.RopeDim), core.WithLast(s, a.RopeDim), tables...)
		query = b.Ew("cat", "query_states", []core.Value{q, qr}, core.WithLast(s, h*qk), dt, "q: nope and roped parts concatenated")
	}
	if a.QPosScale {
		query = qPosScale(b, query, s[len(s)-2])
	}
	key := b.Ew("cat", "key_states", []core.Value{kvb, kr}, core.WithLast(s, h*qk), dt, "k: nope part and the shared rope key expanded to the heads")
	// SDPA reads v as the v_head_dim view of kv_b_proj's output, which it
	// keeps: its P x V product is v_head_dim wide (transformers 4.57.1
	// modeling_deepseek_v3.py: k_pass, value_states = torch.split(k_pass,
	// [qk_nope_head_dim, v_head_dim], dim=-1)).
	value, vd := kvb, a.VDim
	if a.Impl == "flash" {
		// flash-attn needs one head dim: transformers pads v to q/k's
		// and crops the output back, a view (4.x in each MLA attention's
		// forward, modeling_deepseek_v3.py at 4.57.1; 5.x inside
		// integrations/flash_attention.py's flash_attention_forward, lines
		// 61-65 and 96-97 at 5.25.0, for every model: the same tensors).
		value, vd = b.Ew("pad", "value_states", []core.Value{kvb}, core.WithLast(s, h*qk), dt, "v padded to the q/k head dim for flash-attn"), qk
	}
	od := a.VDim
	if a.Impl == "flash" {
		od = qk
	}
	// DeepSeek Sparse Attention: the indexer's top-k keys become a mask
	// SDPA takes as an additive bias (mla_indexer.go).
	bias := core.NoValue
	if a.Indexer != nil {
		bias = a.sparseBias(b, xg, qa, s, dt)
	} else if a.Dots.Window > 0 {
		bias = a.Dots.windowBias(b, a.Impl, s, dt)
	}
	// Under Ulysses the kernel runs on the whole sequence and a cp-th of
	// the heads: q, k and v are exchanged by all-to-alls before it and
	// its output after it, as for attention() (ulysses.go; DeepSpeed's
	// DistributedAttention wraps any local attention).
	sa, ha := s, h
	if b.Par.Ulysses() {
		cp := b.Par.Cpn()
		sa = append([]int64(nil), s...)
		sa[len(sa)-2] *= cp
		ha = h / cp
		vw := a.VDim // SDPA's v is the v_head_dim view of kv_b_proj's output; the all-to-all makes it a tensor
		if a.Impl == "flash" {
			vw = qk
		}
		exchange := func(name string, x core.Value, width int64) core.Value {
			return ulyssesAllToAll(b, name, x, core.WithLast(sa, ha*width), name+" for the whole sequence and a cp-th of the heads (Ulysses all-to-all)")
		}
		query, key, value = exchange("q", query, qk), exchange("k", key, qk), exchange("v", value, vw)
	}
	rows := core.Rows(sa)
	ins := []core.Value{query, key, value}
	if bias != core.NoValue {
		ins = append(ins, bias)
	}
	i := b.AddOp("attention", a.Impl+"_attention", ins)
	o := b.Out(i, "attn_out", core.WithLast(sa, ha*od), dt, "attention output")
	lse := b.Out(i, "logsumexp", []int64{rows, ha}, units.FP32, "attention logsumexp (fp32, saved)")
	b.Val(lse).Grad = false
	b.Save(i, query, key, value, o, lse, bias)                               // the bias as SDPA's efficient kernel keeps it for backward
	b.Op(i).WorkB = units.FP32.Bytes(rows*ha*qk) + units.FP32.Bytes(rows*ha) // fp32 dq accumulator, softmax_d
	seq := float64(sa[len(sa)-2])
	keys := seq
	if a.Causal && bias == core.NoValue { // a kernel given a mask computes every block
		keys /= 2
	}
	b.Op(i).Flops = 2 * float64(rows) * keys * float64(ha) * float64(qk+vd)
	ringAttention(b, i, query, key, value, b.Val(key).Bytes+b.Val(value).Bytes)
	if b.Par.Ulysses() {
		o = ulyssesBack(b, o, s)
	}
	merged := o
	if !a.NoRope || a.Impl != "sdpa" || b.Par.Ulysses() {
		merged = b.Ew("contiguous", "merge_heads", []core.Value{o}, core.WithLast(s, h*a.VDim), dt, "heads merged (and flash's padding dropped): the o_proj input")
	}
	if a.HeadGate {
		merged = a.headGate(b, x, xg, merged)
	}
	if a.QGate {
		merged = a.outputGate(b, q, merged, h)
	}
	return b.RowLinear("o_proj", core.RoleO, merged, a.Heads*a.VDim, h*a.VDim, a.Dim, a.Bias)
}

// headGate lowers HeadGate: o * sigmoid(g_proj(x).float()).to(x's dtype)
// per head.
func (a *MLA) headGate(b *core.Builder, x, xg, o core.Value) core.Value {
	h := a.Heads / b.Par.Tpn()
	g := b.ColLinear("g_proj", core.RoleLinear, x, xg, a.Dim, a.Heads, h, false)
	if a.Dots.GateNative {
		return dotsGate(b, g, o)
	}
	i := b.AddOp("sigmoid", "gate", []core.Value{g})
	sg := b.Out(i, "gate_sigmoid", b.Shape(g), units.FP32, "sigmoid(g_proj(x).float()), saved by sigmoid")
	b.Save(i, sg)
	b.Op(i).Flops = 4 * float64(core.Numel(b.Shape(g)))
	gate := b.Cast(sg, b.Dtype(xg), "the head gate in the hidden state's dtype, saved by the product")
	return b.Mul("gated", o, gate)
}
