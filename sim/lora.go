package sim

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

func (l *LoRA) targets(role string) bool {
	for _, t := range l.Targets {
		if t == role || (t == "all-linear" && role != "lm_head" && role != "router") {
			return true
		}
		if role == "qkv" && (t == "q" || t == "k" || t == "v") {
			return true
		}
	}
	return false
}

// loraAdapter adds B(A(dropout(x))) * scale to the base output y.
func (b *builder) loraAdapter(x, y Value, in, out int64) Value {
	defer b.scope("lora")()
	r := b.lora.Rank
	h := b.dropout("dropout", x, b.lora.Dropout)
	a := b.adapterLinear("lora_A", h, in, r)
	u := b.adapterLinear("lora_B", a, r, out)
	// * scaling: Tensor * Scalar saves nothing.
	i := b.addOp("mul", "scale", []Value{u})
	s := b.out(i, "scaled", b.shape(u), b.dtype(u), "scaled LoRA update")
	return b.add("lora_sum", y, s)
}

func (b *builder) adapterLinear(name string, x Value, in, out int64) Value {
	defer b.scope(name)()
	w := b.adapterParam("weight", []int64{out, in}, "lora")
	dt := b.dtype(x)
	if b.prec.Autocast {
		dt = b.prec.Compute
	}
	xin := b.cast(x, dt, "autocast copy of LoRA input")
	wv := b.weight(w, dt)
	ins := []Value{xin}
	if wv != NoValue {
		ins = append(ins, wv)
	}
	i := b.addOp("matmul", "", ins, w)
	y := b.out(i, "out", withLast(b.shape(xin), out), dt, "LoRA "+name+" output")
	b.save(i, xin)
	if b.grad(xin) {
		b.save(i, wv)
	}
	b.op(i).Flops = 2 * float64(rows(b.shape(xin))) * float64(in) * float64(out)
	return y
}
