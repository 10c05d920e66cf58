package core

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// LoRA freezes the base weights and adds trainable low-rank adapters
// (A: rank x in, B: out x rank) to the linear layers whose role is targeted,
// as PEFT's LoraLayer does: y = base(x) + B(A(dropout(x))) * alpha/rank.
//
// Targets name roles, as PEFT's target_modules name modules by their last
// name: "gate", "up" and "down" reach every gate_proj, up_proj and
// down_proj, the experts' too when they are nn.Linear modules (an MoE with
// impl "loop": PEFT matches Qwen2-MoE's mlp.experts.3.gate_proj by its
// name); "expert_gate", "expert_up" and "expert_down" reach the experts
// only (Mixtral's w1, w3, w2). "all-linear" is PEFT's: every nn.Linear but
// the output layer, routers that are nn.Linear modules included (Mixtral's
// gate). Experts and routers stored as parameters (impls "fused_loop" and
// "grouped", DeepSeek's and gpt-oss's routers) are not nn.Linear modules
// and get no adapters.
//
// The adapters' dtype is PEFT's (get_peft_model's autocast_adapter_dtype,
// True by default since peft 0.12: cast_adapter_dtype in
// peft/tuners/tuners_utils.py casts bf16 and fp16 adapter weights to
// fp32): over a bf16 or fp16 base they are fp32, and so are their
// gradients and optimizer states; BaseDType (autocast_adapter_dtype=False,
// or a trainer that keeps them in the model's dtype: torchtune, LitGPT,
// TRL's peft_module_casting_to_bf16) keeps them in the params dtype.
// Plan.AdapterDType says which applies.
type LoRA struct {
	Rank    int64
	Alpha   float64
	Targets []string // roles (q k v o qkv gate up down lm_head, or all-linear) or module names (lora_targets.go)
	// Pattern is PEFT's target_modules given as one string: a regular
	// expression a linear's whole module path must match (re.fullmatch,
	// BaseTuner._check_target_module_exists at peft 0.21.2); it stands for
	// Targets, which are then empty (lora_targets.go).
	Pattern string
	// TargetParameters are PEFT's target_parameters: parameters wrapped
	// in its ParamWrapper by name (a path ending in "." and the name:
	// "mlp.experts.gate_up_proj"), as the MoE conversion wraps them
	// (lora_experts.go).
	TargetParameters []string
	Dropout          float64
	BaseDType        bool // adapters in the base's dtype (autocast_adapter_dtype=False); false: PEFT's fp32 over a 16-bit base
}

var linearRoles = []string{"q", "k", "v", "o", "qkv", "gate", "up", "down", "lm_head", "router", "linear", "expert_gate", "expert_up", "expert_down"}

// String is the lora() call that makes l, its defaults left out.
func (l LoRA) String() string {
	q := make([]string, len(l.Targets))
	for i, t := range l.Targets {
		q[i] = strconv.Quote(t)
	}
	s := fmt.Sprintf("lora(rank=%d, alpha=%s, targets=[%s]", l.Rank, strconv.FormatFloat(l.Alpha, 'g', -1, 64), strings.Join(q, ", "))
	if l.Pattern != "" {
		s = fmt.Sprintf("lora(rank=%d, alpha=%s, target_pattern=%s", l.Rank, strconv.FormatFloat(l.Alpha, 'g', -1, 64), strconv.Quote(l.Pattern))
	}
	if l.Dropout != 0 {
		s += ", dropout=" + strconv.FormatFloat(l.Dropout, 'g', -1, 64)
	}
	if len(l.TargetParameters) > 0 {
		q := make([]string, len(l.TargetParameters))
		for i, t := range l.TargetParameters {
			q[i] = strconv.Quote(t)
		}
		s += ", target_parameters=[" + strings.Join(q, ", ") + "]"
	}
	if l.BaseDType {
		s += ", autocast_adapter_dtype=False"
	}
	return s + ")"
}

// Validate checks rank, dropout and target names.
func (l *LoRA) Validate() error {
	if l.Rank <= 0 {
		return fmt.Errorf("lora: rank must be positive (got %d)", l.Rank)
	}
	if l.Dropout < 0 || l.Dropout >= 1 {
		return fmt.Errorf("lora: dropout must be in [0, 1) (got %g)", l.Dropout)
	}
	if l.Pattern != "" {
		if len(l.Targets) > 0 {
			return fmt.Errorf("lora: target_pattern stands for targets, as PEFT's target_modules is a string or a list: give one of them")
		}
		if _, err := compileTargetPattern(l.Pattern); err != nil {
			return err
		}
	} else if len(l.Targets) == 0 && len(l.TargetParameters) == 0 {
		return fmt.Errorf("lora: targets must name at least one module role (known: all-linear, %v)", linearRoles)
	}
	for _, t := range l.TargetParameters {
		if err := checkNameTarget(t); err != nil {
			return fmt.Errorf("lora: target_parameters: %w", err)
		}
	}
	for _, t := range l.Targets {
		if !isLoRARole(t) {
			if err := checkNameTarget(t); err != nil {
				return err
			}
		}
	}
	return nil
}

// AdapterDType is the dtype PEFT stores the adapters in, when it is not
// the params dtype (InvalidDType: the params dtype, the adapters a plain
// parameter like any other). get_peft_model(autocast_adapter_dtype=True)
// casts adapters over a bf16 or fp16 base to fp32. LitGPT's own LoRA
// (Model.NativeLoRA) builds them with the model, in its dtype. Under
// autocast they take the params dtype (fp32 with bf16-mixed; bf16 params
// under autocast are TRL's QLoRA, whose peft_module_casting_to_bf16 casts
// the adapters back to bf16); a layout that shards parameters or optimizer
// state (ZeRO, FSDP, Megatron's distributed optimizer) flattens one
// dtype per buffer, and memsh keeps the adapters in the params dtype
// there, as it does under a precision with a master copy
// (Precision.Master; docs/peft.md).
func (p *Plan) AdapterDType() units.DType {
	l := p.LoRA
	if l == nil || l.BaseDType || p.Precision.Autocast || (p.Model != nil && p.Model.NativeLoRA) {
		return units.InvalidDType
	}
	if par := p.Parallel; par.Zero > 0 || par.FSDP || par.DistributedOptimizer || p.Precision.Master != units.InvalidDType {
		return units.InvalidDType
	}
	switch p.Precision.Params {
	case units.BF16, units.FP16:
		return units.FP32
	}
	return units.InvalidDType
}

// targets reports whether a target names role; allLinear: "all-linear"
// counts (false where PEFT's all-linear leaves the linear out:
// lora_experts.go).
func (l *LoRA) targets(role Role, allLinear bool) bool {
	for _, t := range l.Targets {
		if Role(t) == role || (allLinear && t == "all-linear" && role != RoleLMHead && role != RoleConv) {
			return true
		}
		if role == RoleQKV && (t == "q" || t == "k" || t == "v") {
			return true
		}
		if Role("expert_"+t) == role { // gate_proj matches the experts' gate_proj too
			return true
		}
	}
	return false
}

// loraAdapter adds B(A(dropout(x))) * scale to the base output y, as
// PEFT's lora.Linear.forward does: the input cast to the adapters' dtype
// (_cast_input_dtype: x.to(lora_A.weight.dtype), a new tensor when they
// differ, which lora_A saves), the adapters' GEMMs in their dtype, the
// update added to the base output with type promotion (an fp32 sum of a
// bf16 output) and the sum cast back to the base output's dtype
// (result.to(torch_result_dtype)). Under autocast the matmuls take the
// autocast dtype whatever the adapters' (AdapterLinear). x is the layer's
// input as it came, not the base linear's autocast copy: autocast caches
// only casts of leaf tensors that require grad (cached_cast in
// aten/src/ATen/autocast_mode.h), so lora_A casts the input (or dropout's
// fp32 output) again and saves that copy, and the base linear's copy,
// unsaved under a frozen weight, is freed after its matmul
// (tools/oracle/peft_autocast_saved.py).
func (b *Builder) loraAdapter(x, y Value, in, out int64) Value {
	defer b.Scope("lora")()
	sum := b.Add("lora_sum", y, b.loraUpdate(x, in, out))
	return b.Cast(sum, b.Dtype(y), "the LoRA sum cast back to the base output's dtype")
}

// loraUpdate is B(A(dropout(x))) * scale, x cast to the adapters' own
// dtype first (none under autocast, where PEFT's bitsandbytes layers skip
// the cast and the matmuls take the autocast dtype).
func (b *Builder) loraUpdate(x Value, in, out int64) Value {
	r := b.Lora.Rank
	if dt := b.AdapterDType(); dt != units.InvalidDType && !b.Prec.Autocast {
		x = b.Cast(x, dt, "PEFT's cast of the LoRA input to the adapters' dtype")
	}
	h := b.Dropout("dropout", x, b.Lora.Dropout)
	a := b.AdapterLinear("lora_A", h, in, r)
	u := b.AdapterLinear("lora_B", a, r, out)
	// * scaling: Tensor * Scalar saves nothing.
	i := b.AddOp("mul", "scale", []Value{u})
	return b.Out(i, "scaled", b.Shape(u), b.Dtype(u), "scaled LoRA update")
}

func (b *Builder) AdapterLinear(name string, x Value, in, out int64) Value {
	defer b.Scope(name)()
	w := b.AdapterParam("weight", []int64{out, in}, RoleLoRA)
	dt := b.Dtype(x)
	if b.Prec.Autocast {
		dt = b.Prec.Compute
	}
	xin := b.Cast(x, dt, "autocast copy of LoRA input")
	wv := b.Weight(w, dt)
	ins := []Value{xin}
	if wv != NoValue {
		ins = append(ins, wv)
	}
	i := b.AddOp("matmul", "", ins, w)
	y := b.Out(i, "out", WithLast(b.Shape(xin), out), dt, "LoRA "+name+" output")
	b.Save(i, xin)
	if b.Grad(xin) {
		b.Save(i, wv)
	}
	b.Op(i).Flops = 2 * float64(Rows(b.Shape(xin))) * float64(in) * float64(out)
	return y
}

// chunkAdapter is PEFT's LoRA on an lm_head that runs once per chunk of
// the sequence (loss_chunks: torchtune calls the LoRA-wrapped output layer
// on each chunk): one pair of adapter weights, autocast's casts of them
// cached (they require grad), applied to each chunk.
type chunkAdapter struct {
	a, b    int32 // lora_A [rank, in], lora_B [out, rank]
	in, out int64
}

func (b *Builder) newChunkAdapter(in, out int64) *chunkAdapter {
	defer b.Scope("lora")()
	r := b.Lora.Rank
	ad := &chunkAdapter{in: in, out: out}
	done := b.Scope("lora_A")
	ad.a = b.AdapterParam("weight", []int64{r, in}, RoleLoRA)
	done()
	done = b.Scope("lora_B")
	ad.b = b.AdapterParam("weight", []int64{out, r}, RoleLoRA)
	done()
	return ad
}

// apply adds B(A(dropout(chunk))) * alpha/rank to y, the logits of the
// chunk n tokens long of the head input x. lora_A reads the chunk anew
// (its own autocast cast or fold copy: ChunkOperand); dropout's output is
// a new contiguous tensor.
func (ad *chunkAdapter) apply(b *Builder, x, y Value, n int64) Value {
	defer b.Scope("lora")()
	s := b.Shape(x)
	chunk := []int64{Numel(s[:len(s)-2]), n, ad.in}
	var h Value
	if b.Lora.Dropout > 0 && !b.Eval {
		i := b.AddOp("dropout", "dropout", []Value{x})
		h = b.Out(i, "dropout", chunk, b.Dtype(x), "LoRA dropout output of a chunk")
		m := b.Out(i, "dropout.mask", chunk, units.BOOL, "dropout mask of a chunk (bool, saved for backward)")
		b.Val(m).Grad = false
		b.Save(i, m)
	} else {
		h = b.ChunkOperand(x, n, true, "LoRA input")
	}
	if dt := b.AdapterDType(); dt != units.InvalidDType && !b.Prec.Autocast {
		// PEFT's cast of the input to the adapters' dtype (before its
		// dropout, here after: the same fp32 tensor reaches lora_A)
		h = b.Cast(h, dt, "PEFT's cast of the LoRA input to the adapters' dtype")
	}
	a := ad.matmul(b, "lora_A", ad.a, h, chunk, ad.in, b.Lora.Rank)
	u := ad.matmul(b, "lora_B", ad.b, a, b.Shape(a), b.Lora.Rank, ad.out)
	i := b.AddOp("mul", "scale", []Value{u}) // * scaling: Tensor * Scalar saves nothing
	sc := b.Out(i, "scaled", b.Shape(u), b.Dtype(u), "scaled LoRA update of a chunk")
	sum := b.Add("lora_sum", y, sc)
	return b.Cast(sum, b.Dtype(y), "the LoRA sum cast back to the logits' dtype")
}

// matmul is one adapter linear on a chunk (shape, k features in, n out).
func (ad *chunkAdapter) matmul(b *Builder, name string, w int32, x Value, shape []int64, k, n int64) Value {
	defer b.Scope(name)()
	dt := b.Dtype(x)
	if b.Prec.Autocast {
		dt = b.Prec.Compute
	}
	xin := b.Cast(x, dt, "autocast copy of LoRA input")
	wv := b.headWeight(w, dt) // autocast's cached cast, shared by the chunks
	ins := []Value{xin}
	if wv != NoValue {
		ins = append(ins, wv)
	}
	i := b.AddOp("matmul", "", ins, w)
	y := b.Out(i, "out", WithLast(shape, n), dt, "LoRA "+name+" output of a chunk")
	b.Save(i, xin)
	if b.Grad(xin) {
		b.Save(i, wv)
	}
	b.Op(i).Flops = 2 * float64(Rows(shape)) * float64(k) * float64(n)
	return y
}
