package core

// DeadGraph lowers what follows as autograd runs a computation whose
// result takes no gradient (DeepSeek-V4's lightning indexer, whose output
// is top-k indices, run without torch.no_grad()): its ops are recorded
// and save what they save, but no backward ever reaches them, and the
// graph, with every tensor it saved, is freed when the call's locals go.
// The returned func ends it: what the ops saved is held until then (a
// keep_alive op), and from then on the ops have no backward (NoGradB),
// their outputs need no gradient and the parameters they registered get
// none (no .grad, no optimizer state). PEFT's LoRA adapters on its linears
// stay trainable (requires_grad, counted as PEFT counts them: MiniMax M3's
// indexer under all-linear, TestLoRAAllLinearAsPEFT) and get no gradient
// all the same (replay's gradlessParams: no op reading them has a
// backward).
func (b *Builder) DeadGraph(name string) func() {
	ops, vals, params := len(b.P.Ops), len(b.P.Values), len(b.P.Params)
	outer := b.dead
	var held []Value
	b.dead = &held
	return func() {
		b.dead = outer
		b.KeepAlive(name, held...)
		for i := ops; i < len(b.P.Ops); i++ {
			b.P.Ops[i].NoGradB = true
		}
		for v := vals; v < len(b.P.Values); v++ {
			b.P.Values[v].Grad = false
		}
		for p := params; p < len(b.P.Params); p++ {
			if b.P.Params[p].Role != RoleLoRA {
				b.P.Params[p].Trainable = false
			}
		}
	}
}
