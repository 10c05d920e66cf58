package core

import "fmt"

// LoRA freezes the base weights and adds trainable low-rank adapters
// (A: rank x in, B: out x rank) to the linear layers whose role is targeted,
// as PEFT's LoraLayer does: y = base(x) + B(A(dropout(x))) * alpha/rank.
type LoRA struct {
	Rank    int64
	Alpha   float64
	Targets []string // roles: q k v o qkv gate up down lm_head, or all-linear
	Dropout float64
}

var linearRoles = []string{"q", "k", "v", "o", "qkv", "gate", "up", "down", "lm_head", "router", "linear"}

// Validate checks rank, dropout and target names.
func (l *LoRA) Validate() error {
	if l.Rank <= 0 {
		return fmt.Errorf("lora: rank must be positive (got %d)", l.Rank)
	}
	if l.Dropout < 0 || l.Dropout >= 1 {
		return fmt.Errorf("lora: dropout must be in [0, 1) (got %g)", l.Dropout)
	}
	if len(l.Targets) == 0 {
		return fmt.Errorf("lora: targets must name at least one module role (known: all-linear, %v)", linearRoles)
	}
	for _, t := range l.Targets {
		ok := t == "all-linear"
		for _, r := range linearRoles {
			ok = ok || r == t
		}
		if !ok {
			return fmt.Errorf("lora: unknown target %q (known: all-linear, q, k, v, o, qkv, gate, up, down, lm_head)", t)
		}
	}
	return nil
}

func (l *LoRA) targets(role Role) bool {
	for _, t := range l.Targets {
		if Role(t) == role || (t == "all-linear" && role != RoleLMHead && role != RoleRouter) {
			return true
		}
		if role == RoleQKV && (t == "q" || t == "k" || t == "v") {
			return true
		}
	}
	return false
}

// loraAdapter adds B(A(dropout(x))) * scale to the base output y.
func (b *Builder) loraAdapter(x, y Value, in, out int64) Value {
	defer b.Scope("lora")()
	r := b.Lora.Rank
	h := b.Dropout("dropout", x, b.Lora.Dropout)
	a := b.AdapterLinear("lora_A", h, in, r)
	u := b.AdapterLinear("lora_B", a, r, out)
	// * scaling: Tensor * Scalar saves nothing.
	i := b.AddOp("mul", "scale", []Value{u})
	s := b.Out(i, "scaled", b.Shape(u), b.Dtype(u), "scaled LoRA update")
	return b.Add("lora_sum", y, s)
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
