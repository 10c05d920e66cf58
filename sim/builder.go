package sim

import "github.com/memsh/memsh/sim/units"

// builder lowers layers into a program for one micro-batch.
type builder struct {
	p      *Program
	batch  int64 // sequences (or samples) in the micro-batch
	seq    int64 // tokens per sequence (1 for non-sequence models)
	prec   Precision
	rt     Runtime
	ckpt   Checkpoint
	lora   *LoRA
	quant  units.DType // quantized frozen base weights (NF4, INT8), InvalidDType when none
	eval   bool        // eval mode: no autograd, no saves, dropout off
	path   []string    // module path; prefix is its joined form
	prefix string
	region int32 // current checkpoint region, 0 = none
	block  int   // index of the current repeated block (for checkpoint(every=k))

	members    int64 // ensemble members in the step (Plan.Members, at least 1)
	sequential bool  // members run through the model one at a time (members.go)
	rollout    int64 // autoregressive steps of a model built from a data batch (rollout.go)

	headCast map[int32]Value // autocast's cached cast of a trainable lm_head weight, shared by its chunks (chunked_loss.go)

	par parLowering // tensor, context and expert parallelism (tp.go)
	ft  *finetune   // quant, freeze, chunked loss, packing (finetune.go)
}

// scope pushes a name onto the module path; the returned func pops it.
func (b *builder) scope(name string) func() {
	if name == "" {
		return func() {}
	}
	saved := b.prefix
	b.path = append(b.path, name)
	b.prefix = joinName(saved, name)
	return func() {
		b.path = b.path[:len(b.path)-1]
		b.prefix = saved
	}
}

func (b *builder) name(n string) string {
	switch {
	case n == "":
		return b.prefix
	case b.prefix == "":
		return n
	}
	return b.prefix + "." + n
}

func (b *builder) val(v Value) *valueInfo { return &b.p.Values[v] }

func (b *builder) shape(v Value) []int64 { return b.p.Values[v].shape }

func (b *builder) dtype(v Value) units.DType { return b.p.Values[v].dtype }

func (b *builder) last(v Value) int64 {
	s := b.p.Values[v].shape
	return s[len(s)-1]
}

// withLast returns shape s with its last dimension replaced.
func withLast(s []int64, n int64) []int64 {
	out := append([]int64(nil), s...)
	out[len(out)-1] = n
	return out
}

// numel is the element count of shape. Lowering calls it for every tensor,
// so it is where sizes are checked: a count past MaxElements (or a negative
// dimension) stops the lowering with an error (checked.go).
func numel(shape []int64) int64 {
	n, ok := units.ShapeNumel(shape)
	if !ok {
		panic(lowerError{units.ShapeError(shape)})
	}
	return n
}

// rows is the product of all but the last dimension (tokens for [b, s, h]).
func rows(shape []int64) int64 { return numel(shape[:len(shape)-1]) }

// param registers a parameter tensor and returns its index.
func (b *builder) param(name string, shape []int64, role string) int32 {
	b.reserveParams(1) // checked.go
	n := numel(shape)
	trainable := !b.eval
	if b.lora != nil && role != "norm-lora" {
		trainable = false // LoRA freezes the base; adapters register their own
	}
	trainable = b.ft.paramTrainable(b.name(name), role, trainable, b.eval) // freeze.go
	b.p.Params = append(b.p.Params, ParamInfo{
		Name: b.name(name), shape: shape, Numel: n, fullNumel: n,
		Trainable: trainable, Role: role, TiedTo: -1,
	})
	return int32(len(b.p.Params) - 1)
}

// adapterParam registers a trainable parameter that stays trainable under LoRA.
func (b *builder) adapterParam(name string, shape []int64, role string) int32 {
	i := b.param(name, shape, role)
	b.p.Params[i].Trainable = !b.eval
	return i
}

func (b *builder) trainable(pi int32) bool {
	p := &b.p.Params[pi]
	if p.TiedTo >= 0 {
		return b.p.Params[p.TiedTo].Trainable
	}
	return p.Trainable
}

// addOp appends an op reading ins and params and returns its index.
func (b *builder) addOp(kind, name string, ins []Value, params ...int32) int32 {
	if len(b.p.Ops) >= maxOps {
		panic(lowerError{opsError()}) // checked.go
	}
	b.p.Ops = append(b.p.Ops, opInfo{
		name: b.name(name), Kind: kind, in: ins, params: params, Region: b.region,
	})
	return int32(len(b.p.Ops) - 1)
}

func (b *builder) op(i int32) *opInfo { return &b.p.Ops[i] }

// out adds an output of op i. It requires grad when an input does or the op
// reads a trainable parameter.
func (b *builder) out(i int32, name string, shape []int64, dt units.DType, why string) Value {
	o := &b.p.Ops[i]
	grad := false
	if !b.eval && dt.Float() {
		for _, v := range o.in {
			if b.p.Values[v].grad {
				grad = true
			}
		}
		for _, pi := range o.params {
			if b.trainable(pi) {
				grad = true
			}
		}
	}
	b.p.Values = append(b.p.Values, valueInfo{
		name: b.name(name), shape: shape, dtype: dt, Bytes: dt.Bytes(numel(shape)),
		grad: grad, Cat: CatActivations, producer: i, why: why,
	})
	v := Value(len(b.p.Values) - 1)
	o.out = append(o.out, v)
	if o.bytes == 0 {
		o.bytes = float64(b.p.Values[v].Bytes)
	} else {
		o.bytes += float64(b.p.Values[v].Bytes)
	}
	return v
}

// save marks storages autograd keeps for op i's backward (none in eval).
func (b *builder) save(i int32, vs ...Value) {
	if b.eval {
		return
	}
	o := &b.p.Ops[i]
	recorded := false // autograd records the op only when an output requires grad
	for _, v := range o.out {
		recorded = recorded || b.p.Values[v].grad
	}
	if !recorded {
		return
	}
	var seen map[Value]bool // for ops saving many tensors (a MoE's expert weights): a linear scan per value is quadratic
	if len(vs)+len(o.saved) > 32 {
		seen = make(map[Value]bool, len(vs)+len(o.saved))
		for _, s := range o.saved {
			seen[s] = true
		}
	}
	for _, v := range vs {
		if v == NoValue {
			continue
		}
		dup := false
		if seen != nil {
			dup = seen[v]
			seen[v] = true
		} else {
			for _, s := range o.saved {
				if s == v {
					dup = true
				}
			}
		}
		if !dup {
			o.saved = append(o.saved, v)
		}
	}
}

func (b *builder) grad(v Value) bool { return b.p.Values[v].grad }

// cast returns x in dtype dt, adding a copy op when it differs (aten::_to_copy,
// which saves nothing for backward).
func (b *builder) cast(x Value, dt units.DType, why string) Value {
	if b.dtype(x) == dt {
		return x
	}
	i := b.addOp("cast", "to_"+dt.Name(), []Value{x})
	y := b.out(i, b.lastName(x)+"."+dt.Name(), b.shape(x), dt, why)
	b.op(i).bytes += float64(b.val(x).Bytes)
	return y
}

func (b *builder) lastName(v Value) string {
	n := b.p.Values[v].name
	for i := len(n) - 1; i >= 0; i-- {
		if n[i] == '.' {
			return n[i+1:]
		}
	}
	return n
}

// promote is PyTorch's type promotion for two float tensors.
func promote(a, c units.DType) units.DType {
	if a == units.FP32 || c == units.FP32 {
		return units.FP32
	}
	if a == units.FP64 || c == units.FP64 {
		return units.FP64
	}
	return a
}

// policyRegion starts a region of the plan's checkpoint policy, which
// picks the reentrant or non-reentrant variant (checkpoint.go).
func (b *builder) policyRegion(name string) func() {
	opened := len(b.p.regions)
	end := b.beginRegion(name)
	if len(b.p.regions) == opened || !b.ckpt.Reentrant {
		return end // a region was open already, or non-reentrant
	}
	id := b.region
	b.p.regions[id-1].reentrant = true
	return func() {
		end()
		b.reentrantNoGrad(id)
	}
}

// reentrantNoGrad marks a reentrant region none of whose inputs requires
// grad: CheckpointFunction ran its forward under no_grad and, with no
// input requiring grad, records no backward node, so nothing made inside
// requires grad (its parameters get no gradient) and nothing is kept.
func (b *builder) reentrantNoGrad(id int32) {
	reg := &b.p.regions[id-1]
	for j := reg.first; j < reg.end; j++ {
		for _, v := range b.p.Ops[j].in {
			if pr := b.p.Values[v].producer; (pr < reg.first || pr >= reg.end) && b.p.Values[v].grad {
				return
			}
		}
	}
	reg.noGrad = true
	for j := reg.first; j < reg.end; j++ {
		for _, v := range b.p.Ops[j].out {
			b.p.Values[v].grad = false
		}
	}
}

// beginRegion starts a checkpoint region unless one is open; the returned
// func closes it.
func (b *builder) beginRegion(name string) func() {
	if b.region != 0 || b.eval {
		return func() {}
	}
	b.p.regions = append(b.p.regions, region{name: b.name(name), first: int32(len(b.p.Ops))})
	id := int32(len(b.p.regions))
	b.region = id
	return func() {
		b.p.regions[id-1].end = int32(len(b.p.Ops))
		b.region = 0
	}
}

// shapeMismatch is raised (as a panic caught by Lower) when layers do not chain.
type lowerError struct{ err *units.Error }

func shapeMismatch(b *builder, kind string, want, got int64) lowerError {
	return lowerError{units.Errorf(b.name(""), "%s expects inputs with %d features but the previous layer gives %d", kind, want, got)}
}
