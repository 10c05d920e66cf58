package replay

import "github.com/memsh/memsh/sim/core"

// analyse reads the program once for the whole step: each value's last
// forward consumer, the inputs of each checkpoint region, what is held
// for backward at the end of the forward (Saved), each parameter's
// earliest reader, and the host copies of offloaded regions. r.last,
// r.Saved, r.regionIn and r.paramLast are made (empty) by the caller.
func (r *Replay) analyse() {
	p := r.P
	nv := len(p.Values)
	// The slices are read into locals once: under the race detector every
	// read of a field is a checked call, at every value of every op.
	last, saved, values, params, paramLast := r.last, r.Saved, p.Values, p.Params, r.paramLast
	for i := range p.Ops {
		op := &p.Ops[i]
		for _, v := range op.In {
			last[v] = int32(i)
			pr := values[v].Producer
			// An input of the op's region and of each enclosing region it
			// comes from outside of; held at the forward's end when it
			// enters an outermost one (inner ones' inputs are saved
			// through the enclosing checkpoint's hooks: recompute holds them).
			for id := op.Region; id != 0; id = p.Regions[id-1].Parent { // innermost first
				reg := &p.Regions[id-1]
				if reg.NoGrad || (pr >= reg.First && pr < reg.End) {
					break
				}
				if !contains(r.regionIn[id-1], v) {
					r.regionIn[id-1] = append(r.regionIn[id-1], v)
				}
				if reg.Parent == 0 {
					saved[v] = true
				}
			}
		}
		if r.savesOnItsOwn(op) {
			for _, v := range op.Saved {
				saved[v] = true
			}
			if op.Region != 0 { // an offloaded region: save_on_cpu's copies
				if r.hostHolds == nil {
					r.hostHolds = make([]int32, nv)
				}
				for _, v := range op.Saved {
					r.hostHolds[v]++
				}
			}
		} else if r.keeps(op) {
			for _, v := range op.Out {
				saved[v] = true
			}
		}
		for _, pi := range op.Params {
			if t := params[pi].TiedTo; t >= 0 { // resolve
				pi = t
			}
			if paramLast[pi] == none {
				paramLast[pi] = int32(i)
			}
		}
	}
}

// SavedAtForwardEnd marks the values of prog that a training step holds
// for backward at the end of its forward (Replay.Saved), without the
// rest of a replay's state.
func SavedAtForwardEnd(prog *core.Program, plan *core.Plan) []bool {
	return SavedAtForwardEndIn(prog, plan, &SavedScratch{})
}

// SavedScratch keeps SavedAtForwardEndIn's lists for the next program
// (the search marks those of its block profiles' programs, tens of
// thousands of small ones, on each worker). It belongs to one goroutine.
type SavedScratch struct {
	last, paramLast []int32
	saved           []bool
	regionIn        [][]core.Value
}

// SavedAtForwardEndIn is SavedAtForwardEnd in s's lists: the marks it
// returns are s's, valid until s marks the next program.
func SavedAtForwardEndIn(prog *core.Program, plan *core.Plan, s *SavedScratch) []bool {
	r := &Replay{P: prog, Plan: plan}
	s.last = zeroed(sized(s.last, len(prog.Values))) // written, not read
	s.saved = zeroed(sized(s.saved, len(prog.Values)))
	s.regionIn = sized(s.regionIn, len(prog.Regions))
	for i := range s.regionIn {
		s.regionIn[i] = s.regionIn[i][:0]
	}
	s.paramLast = fill(sized(s.paramLast, len(prog.Params)), none)
	r.last, r.Saved, r.regionIn, r.paramLast = s.last, s.saved, s.regionIn, s.paramLast
	r.analyse()
	return r.Saved
}

// gradlessParams marks the parameters that get no gradient in a step like
// the replayed one: no op reads them (a vision tower without images,
// Gemma 4's audio tower, whose input memsh does not model), or every op
// reading them runs inside a reentrant checkpoint region that records no
// graph or under no_grad (none of its outputs requires grad: a LoRA
// adapter in DeepSeek-V3.2's indexer). An expert no token reached in the
// replayed step (Unrouted) is not one: other steps' tokens reach it.
func gradlessParams(p *core.Program) []bool {
	withGrad := make([]bool, len(p.Params))
	params := p.Params
	for i := range p.Ops {
		op := &p.Ops[i]
		for _, pi := range op.Params {
			if t := params[pi].TiedTo; t >= 0 {
				pi = t
			}
			if (op.Region == 0 || !p.Regions[op.Region-1].NoGrad) && p.HasBackward(op) {
				withGrad[pi] = true
			}
		}
	}
	out := make([]bool, len(p.Params))
	for i := range out {
		out[i] = !withGrad[i] && !params[i].Unrouted
	}
	return out
}

// stateless reports whether trainable parameter pi holds no optimizer
// state (nor master weight) on this rank: it gets no gradient
// (gradlessParams) and the optimizer makes a parameter's state in its
// first step() where the parameter has a gradient. torch.optim's Adam and
// AdamW, foreach and fused alike, skip a parameter whose grad is None
// (torch/optim/adam.py _init_group: "if p.grad is not None", which makes
// state["exp_avg"] etc. there; sgd.py _init_group likewise for the
// momentum buffer); bitsandbytes' optimizers (optimizer.py
// Optimizer8bit.step: "if p.grad is None: continue" before init_state);
// an optimizer in backward steps from a post-accumulate-grad hook, which
// never fires. FSDP2's parameters are DTensors the optimizer sees one by
// one: the same rule per sharded parameter.
//
// Where the state is made for every trainable parameter up front it
// stays (the callers do not ask): DeepSpeed ZeRO's flat fp32 partitions
// (stage_1_and_2.py, stage3.py), Megatron's distributed optimizer over
// its whole gradient buffer, and precision "megatron", whose fp32 main
// parameters take their grads from the grad buffer's main_grad, which
// every parameter has (megatron/core/optimizer/optimizer.py
// _copy_model_grads_to_main_grads). FSDP1's optimizer steps flat
// parameters, each with a gradient when any of its parameters has one:
// fsdp1_idle.go.
func (r *Replay) stateless(pi int) bool {
	return r.gradless[pi] && !r.Plan.Precision.Megatron
}

// stepped reports whether the optimizer's step() holds state for
// parameter pi and so updates it and makes its step temporaries (a
// foreach step's one tensor per parameter in the list _init_group builds
// of the parameters with a gradient): a trainable parameter (its tied
// copy is its owner's) that is not stateless, or under FSDP1, whose
// optimizer steps the FlatParameters, one whose unit runs
// (fsdp1IdleShards). The ZeRO and Megatron layouts, whose state is made
// for every trainable parameter up front, do not ask.
func (r *Replay) stepped(pi int) bool {
	p := &r.P.Params[pi]
	if !p.Trainable || p.TiedTo >= 0 {
		return false
	}
	if d := r.Dist; d != nil && d.fsdp1 {
		return d.fsdp1Idle == nil || !d.fsdp1Idle[pi]
	}
	return !r.stateless(pi)
}
