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

// gradlessParams marks the parameters that every reading op reads inside a
// reentrant checkpoint region that records no graph: they get no gradient,
// and torch.optim makes state only for parameters that have one.
func gradlessParams(p *core.Program) []bool {
	read := make([]bool, len(p.Params))
	withGrad := make([]bool, len(p.Params))
	params := p.Params
	for i := range p.Ops {
		op := &p.Ops[i]
		for _, pi := range op.Params {
			if t := params[pi].TiedTo; t >= 0 {
				pi = t
			}
			read[pi] = true
			if op.Region == 0 || !p.Regions[op.Region-1].NoGrad {
				withGrad[pi] = true
			}
		}
	}
	out := make([]bool, len(p.Params))
	for i := range out {
		out[i] = read[i] && !withGrad[i]
	}
	return out
}
