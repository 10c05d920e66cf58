package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// Ensemble members (Plan.Members, Plan.MembersMode).
//
// lowerProgram always folds members into the batch, so the program input
// holds every member's rows. With "stacked" (anemoi's behaviour:
// ens_encoder_processor_decoder.py bse = batch_size * ensemble_size) the
// model body runs once over all of them. With "sequential" it runs once
// per member on that member's rows, keeping each member's saved tensors
// (and checkpoint inputs) until the backward reaches it; the members'
// outputs are concatenated (torch.cat) before the loss, so the loss still
// sees all members, and the backward walks the members in reverse order
// because it walks the ops in reverse. Nothing in the forward couples the
// members (layer norms and noise are per sample), so the maths is the same.
//
// The members share one set of parameters: the parameters each member's
// lowering registers are tied to the first member's, so they are held,
// stepped and given gradients once. Autocast's weight cache is keyed by the
// weight and lives until the autocast region ends (the whole forward of all
// members), so the low-precision weight copies are made once too: the later
// members read the first member's copies.

// With "spread" (anemoi's ensemble parallelism, DDPEnsGroupStrategy with
// num_gpus_per_ensemble = members x num_gpus_per_model) each GPU group
// runs one member: the batch holds one member's rows, the model body runs
// once, and the predictions of every member are all-gathered over the
// ensemble group before the loss (ensforecaster.py gather_and_compute_loss:
// gather_tensor of y_pred), a new tensor of all members' rows; its
// backward hands this member its slice of the gradient. The layout counts
// the members' GPU groups in dp (validateMembers).

// foldedMembers is the members folded into this GPU's batch.
func (b *Builder) foldedMembers() int64 {
	if b.spread {
		return 1
	}
	return b.members
}

// lowerMembers lowers the model body for input x (whose first dimension is
// batch * members) once, or once per member followed by a concatenation;
// spread, x is one member's and the members' outputs are gathered.
func (b *Builder) lowerMembers(m *Model, x Value) Value {
	if b.spread {
		y := m.lowerBody(b, x)
		op := b.AddOp("all_gather", "members_gather", []Value{y})
		shape := append([]int64(nil), b.Shape(y)...)
		shape[0] *= b.members
		v := b.Out(op, "members_gathered", shape, b.Dtype(y), fmt.Sprintf("the predictions of the %d members, each from its own GPU group, gathered for the loss (gather_tensor)", b.members))
		b.Op(op).NoGradB = true
		b.RecordComm("all_gather", "dp", b.Val(v).Bytes, false)
		return v
	}
	if !b.sequential || b.members <= 1 {
		return m.lowerBody(b, x)
	}
	shape := b.Shape(x)
	if len(shape) == 0 || shape[0]%b.members != 0 {
		panic(LowerError{units.Errorf(m.Name, "cannot split a batch of %v rows into %d members", shape, b.members)})
	}
	per := shape[0] / b.members
	tables := len(b.P.Tables)
	block := b.block
	var first lowering
	var outs []Value
	for i := int64(0); i < b.members; i++ {
		b.checkStop()
		done := b.Scope(fmt.Sprintf("member%d", i))
		b.block = block // checkpoint(every=k) counts blocks within one member
		xi := b.memberSlice(x, i, per)
		l := b.startLowering()
		outs = append(outs, m.lowerBody(b, xi))
		if i == 0 {
			first = b.endLowering(l)
		} else {
			b.relowered(first, b.endLowering(l))
		}
		done()
	}
	if len(b.P.Tables) > tables {
		panic(LowerError{&units.Error{Path: m.Name, Msg: "sequential members are not modelled for models with table layers (each member would set up its own table)",
			Hint: "use members_mode=\"stacked\""}})
	}
	return b.catMembers(outs)
}

// memberSlice is x[i*per:(i+1)*per]: a view of the batch, no new storage.
func (b *Builder) memberSlice(x Value, i, per int64) Value {
	op := b.AddOp("slice", "member_input", []Value{x})
	shape := append([]int64{per}, b.Shape(x)[1:]...)
	v := b.Out(op, "input", shape, b.Dtype(x), fmt.Sprintf("view of member %d's rows of the batch (no new storage)", i))
	b.Val(v).Bytes = 0
	b.Op(op).Bytes = 0
	return v
}

// catMembers is torch.cat of the members' outputs along the batch. It
// saves nothing, and its backward hands each member a view of the
// incoming gradient (CatBackward0 narrows), so it allocates no input
// gradients.
func (b *Builder) catMembers(outs []Value) Value {
	op := b.AddOp("cat", "members_cat", outs)
	shape := append([]int64(nil), b.Shape(outs[0])...)
	shape[0] *= int64(len(outs))
	v := b.Out(op, "members_cat", shape, b.Dtype(outs[0]), fmt.Sprintf("the %d members' outputs concatenated before the loss", len(outs)))
	b.Op(op).NoGradB = true
	return v
}

// lowering is what lowering some layers registered: its parameter and op
// ranges, and the module buffers before it.
type lowering struct {
	params, ops [2]int
	buffers     int
}

func (b *Builder) startLowering() lowering {
	return lowering{params: [2]int{len(b.P.Params)}, ops: [2]int{len(b.P.Ops)}, buffers: len(b.P.Buffers)}
}

func (b *Builder) endLowering(l lowering) lowering {
	l.params[1], l.ops[1] = len(b.P.Params), len(b.P.Ops)
	return l
}

// relowered makes a second lowering of the same layers (again: another
// member, another rollout step) the same module as the first: its
// parameters and autocast weight copies are the first's (shareMember), and
// the buffers it registered again are dropped.
func (b *Builder) relowered(first, again lowering) {
	b.shareMember(first.params, again.params, first.ops, again.ops)
	b.P.Buffers = b.P.Buffers[:again.buffers]
}

// SharedCalls makes every call of the same modules after the first share
// the first's parameters and weight copies (shareMember): anemoi's mapper
// run once per destination chunk (sim/graph), a vision tower run on the
// images and then on the videos (sim/nn). Begin and End bracket each
// call.
type SharedCalls struct {
	params, ops           int    // where the current call's began
	firstParams, firstOps [2]int // the first call's spans; set once it ends
	calls                 int    // calls ended so far
}

// Begin marks where the next call's parameters and ops start.
func (c *SharedCalls) Begin(b *Builder) { c.params, c.ops = len(b.P.Params), len(b.P.Ops) }

// End closes the call begun last: the first call's spans are kept, a
// later call's are shared with them.
func (c *SharedCalls) End(b *Builder) {
	params, ops := [2]int{c.params, len(b.P.Params)}, [2]int{c.ops, len(b.P.Ops)}
	if c.calls == 0 {
		c.firstParams, c.firstOps = params, ops
	} else {
		b.shareMember(c.firstParams, params, c.firstOps, ops)
	}
	c.calls++
}

// shareMember ties the parameters of a later member (range q) to the first
// member's (range p) and points its autocast weight copies at the first
// member's. Both members lowered the same layers in the same order.
func (b *Builder) shareMember(p, q [2]int, opsP, opsQ [2]int) {
	if p[1]-p[0] != q[1]-q[0] {
		panic(LowerError{units.Errorf(b.Name(""), "internal error: members registered %d and %d parameters", p[1]-p[0], q[1]-q[0])})
	}
	root := func(pi int) int32 {
		if t := b.P.Params[pi].TiedTo; t >= 0 {
			return t
		}
		return int32(pi)
	}
	for j := 0; j < p[1]-p[0]; j++ {
		b.P.Params[q[0]+j].TiedTo = root(p[0] + j)
	}
	b.shareCasts(opsP, opsQ)
}

// shareCasts points the autocast weight copies the ops of range opsQ
// make of tied parameters at the copies the ops of range opsP made of
// the parameters they are tied to (autocast's cache: one copy of a leaf
// a forward), dropping the later casts.
func (b *Builder) shareCasts(opsP, opsQ [2]int) {
	root := func(pi int) int32 {
		if t := b.P.Params[pi].TiedTo; t >= 0 {
			return t
		}
		return int32(pi)
	}
	// The first member's weight copies, by parameter.
	copies := map[int32]Value{}
	for i := opsP[0]; i < opsP[1]; i++ {
		if o := &b.P.Ops[i]; isWeightCast(o) {
			copies[root(int(o.Params[0]))] = o.Out[0]
		}
	}
	renamed := map[Value]Value{}
	for i := opsQ[0]; i < opsQ[1]; i++ {
		o := &b.P.Ops[i]
		if isWeightCast(o) {
			if v0, ok := copies[b.P.Params[o.Params[0]].TiedTo]; ok {
				renamed[o.Out[0]] = v0
				b.P.Values[o.Out[0]].Cached = false
				o.Out, o.Params, o.Flops, o.Bytes = nil, nil, 0, 0
			}
			continue
		}
		for k, v := range o.In {
			if r, ok := renamed[v]; ok {
				o.In[k] = r
			}
		}
		for k, v := range o.Saved {
			if r, ok := renamed[v]; ok {
				o.Saved[k] = r
			}
		}
	}
}

// isWeightCast reports an autocast weight copy (builder.weight).
func isWeightCast(o *OpInfo) bool {
	return o.Kind == "cast" && len(o.In) == 0 && len(o.Params) == 1 && len(o.Out) == 1
}
