package nn

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// sparseMixerTopK is how many experts PhiMoE's sparsemixer picks a
// token: two rounds, whatever num_experts_per_tok says (sparsemixer's
// top_k argument is never read).
const sparseMixerTopK = 2

// routeSparseMixer lowers PhiMoE's router as transformers trains it
// (sparsemixer in models/phimoe/modeling_phimoe.py, read at 5.25.0;
// PhimoeSparseMoeBlock's router.forward): the nn.Linear's logits in the
// activations' dtype, then two rounds of
//
//   - the mask of the experts far from the best (under no_grad) and
//     scores.masked_fill(mask, -inf), whose MaskedFillBackward0 saves the
//     bool [T, E] mask;
//   - Gumbel sampling: (masked - exponential().log()).max(-1)[1], the
//     chosen expert, int64 [T] (its MaxBackward0 dies with the unused
//     values; the gather, PhimoeMultiplier and scatter save the index);
//   - softmax(masked) [T, E] in the activations' dtype (saved), the
//     chosen expert's gate gathered, [T, 1] (PhimoeMultiplier saves it,
//     the index and the softmax), mask_for_one from the midpoint's
//     max and a rand_like (no gradient), and PhimoeMultiplier's output
//     [T, 1];
//   - the first round's choice scattered to -inf in the logits for the
//     second (torch.scatter, a new [T, E]; ScatterBackward0 saves the
//     index);
//
// the two multipliers and choices concatenated into [T, 2]. Measured on
// the CPU: a tiny PhiMoE keeps, beside the rest of its layer, two bool
// [T, E], two int64 [T], two [T, E] and two [T, 1] a layer
// (TestPhimoeSavesAsTransformers).
func (m *MoE) routeSparseMixer(b *core.Builder, x core.Value, r routing) routing {
	T, E := r.tokens, m.Experts
	logits := b.Linear(nameOr(m.RouterName, "gate"), core.RoleRouter, x, m.Dim, E, false)
	dt := b.Dtype(logits)
	scores := logits
	var gates, choices []core.Value
	for round := range sparseMixerTopK {
		mf := b.AddOp("masked_fill", "masked_gates", []core.Value{scores})
		masked := b.Out(mf, "masked_gates", []int64{T, E}, dt, "the scores with the experts far from the best at -inf")
		mask := b.Out(mf, "threshold_mask", []int64{T, E}, units.BOOL, "the experts far from the best (computed under no_grad; MaskedFillBackward0 saves it)")
		b.Val(mask).Grad = false
		b.Save(mf, mask)
		gm := b.AddOp("max", "gumbel_choice", []core.Value{masked})
		b.Op(gm).NoGradB = true
		idx := b.Out(gm, "selected_experts", []int64{T, 1}, units.INT64, "the expert Gumbel sampling picks ((masked - exponential().log()).max(-1)[1])")
		b.Val(idx).Grad = false
		b.Op(gm).WorkF = 2 * dt.Bytes(T*E) // the exponential noise and the difference
		sm := b.AddOp("softmax", "masked_softmax", []core.Value{masked})
		probs := b.Out(sm, "masked_probs", []int64{T, E}, dt, "softmax over the masked scores")
		b.Save(sm, probs)
		b.Op(sm).Flops = 5 * float64(T*E)
		g := b.AddOp("gather", "multiplier_o", []core.Value{probs, idx})
		mo := b.Out(g, "multiplier_o", []int64{T, 1}, dt, "the chosen expert's gate")
		b.Save(g, idx)
		pm := b.AddOp("mul", "multiplier", []core.Value{mo, probs, idx})
		mult := b.Out(pm, "multiplier", []int64{T, 1}, dt, "PhimoeMultiplier: the gate times mask_for_one (Heun's third-order estimate)")
		b.Save(pm, mo, idx, probs)
		gates, choices = append(gates, mult), append(choices, idx)
		if round+1 < sparseMixerTopK {
			sc := b.AddOp("scatter", "masked_scores", []core.Value{logits, idx})
			scores = b.Out(sc, "masked_scores", []int64{T, E}, dt, "the logits with the first choice at -inf")
			b.Save(sc, idx)
		}
	}
	c := b.AddOp("cat", "routing_weights", gates)
	r.weights = b.Out(c, "routing_weights", []int64{T, sparseMixerTopK}, dt, "the two multipliers (torch.concat)")
	ci := b.AddOp("cat", "expert_index", choices)
	b.Op(ci).NoGradB = true
	r.idx = b.Out(ci, "expert_index", []int64{T, sparseMixerTopK}, units.INT64, "the two choices (torch.concat)")
	b.Val(r.idx).Grad = false
	return r
}
