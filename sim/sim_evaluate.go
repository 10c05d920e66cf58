package sim

// Evaluate replays one steady-state step of the plan on one GPU: it
// validates the plan, lowers it (or replays each pipeline stage), replays
// the program through the allocator model, runs the time model over the
// replay and adds a graph model's notes.
func Evaluate(plan *Plan, opts Options) (*Report, error) {
	if err := plan.Validate(); err != nil {
		return nil, err
	}
	if rep, ok, err := evaluatePipeline(plan, opts); ok { // pipeline.go: one replay per stage
		return rep, err
	}
	prog, err := plan.LowerProgram()
	if err != nil {
		return nil, err
	}
	if err := plan.checkFirstStep(prog); err != nil { // first_step.go
		return nil, err
	}
	r, err := Run(prog, plan, opts)
	if err != nil {
		return nil, err
	}
	rep := r.Report()
	rep.Time = stepTime(prog, plan, r)
	graphAdvice(plan, rep) // graph_advice.go: notes on a graph model's failure
	if err := r.Settle(); err != nil {
		return nil, err
	}
	return rep, nil
}
