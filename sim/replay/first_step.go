package replay

// firstStepStates allocates the optimizer state the first
// optimizer.step() creates, before its update. A first step replayed
// before the steady one (lazy_states.go) keeps their tensors' ids in
// lazyIDs, in the order it makes them.
func (r *Replay) firstStepStates() {
	if !r.Plan.FirstStep {
		return
	}
	for pi := range r.P.Params {
		p := &r.P.Params[pi]
		if !r.stepped(pi) {
			continue
		}
		states := r.Plan.Muon().ParamStates(p, p.StateDType(r.Plan.Precision))
		for _, s := range states.List() {
			id := r.allocState(p, s, ", created by the first optimizer.step()")
			if r.lazy {
				r.lazyIDs = append(r.lazyIDs, id)
			}
		}
	}
}
