package replay

import (
	"slices"
	"strings"

	"github.com/memsh/memsh/sim/core"
)

// FSDP1's reshard-only hook under reentrant checkpointing. Hugging Face
// transformers 4.x checkpoints a decoder layer by calling the FSDP-wrapped
// layer inside torch.utils.checkpoint (use_reentrant=True, its default:
// modeling_llama.py's _gradient_checkpointing_func(decoder_layer.__call__,
// ...)), so the recompute in the backward calls the FSDP unit with the
// checkpoint's detached inputs, leaves that require grad. A unit whose
// FlatParameter needs no gradient (a frozen base layer whose adapters peft's
// fsdp_auto_wrap_policy wraps on their own) registers its reshard-only hook
// there (_register_post_backward_reshard_only_hook, since PyTorch 2.1:
// pytorch/pytorch#101982; register_multi_grad_hook on the unit's forward
// inputs). The hook's closure holds those inputs' grad_fns
// (torch/autograd/graph.py, register_multi_grad_hook: grad_fns =
// map(_get_grad_fn_or_grad_acc, tensors)); a leaf's is its AccumulateGrad,
// which holds the leaf, whose hooks hold the closure. That cycle lasts
// until FSDP's final callback removes the hook (_finalize_params deletes
// _post_backward_hook_state) when the backward ends, so each such unit's
// recompute input, whose storage is the checkpoint's saved input, and its
// .grad, the gradient the layer's backward accumulated into it and passed
// down, stay allocated until then. Measured on the CPU with transformers
// 4.45.2, peft 0.13.2 and torch 2.15 (tools/oracle/fsdp1_reentrant.py):
// FSDP1 (world size 1, gloo) over a LoRA Llama keeps one hidden-sized
// gradient per layer already backpropagated; with the hook disabled the
// peak is the unwrapped model's.

// retainsRecomputeInputs reports whether region id's recompute leaves its
// inputs and their gradients allocated until the backward ends: FSDP1, a
// reentrant checkpoint, and an input requiring grad that the module of a
// unit holding no trainable parameter reads (the unit's forward gets the
// detached leaf).
func (d *distState) retainsRecomputeInputs(r *Replay, id int32) bool {
	if d == nil || !d.fsdp1 {
		return false
	}
	reg := r.P.Regions[id-1]
	if !reg.Reentrant || reg.NoGrad || reg.Parent != 0 {
		return false
	}
	var frozen []string // modules of the frozen units the region runs
	for j := reg.First; j < reg.End; j++ {
		for _, u := range d.opUnits[j] {
			if un := &d.units[u]; !un.trainable && !un.root && !slices.Contains(frozen, un.name) {
				frozen = append(frozen, un.name)
			}
		}
	}
	for j := reg.First; j < reg.End && len(frozen) > 0; j++ {
		op := &r.P.Ops[j]
		for _, v := range op.In {
			if !r.P.Values[v].Grad || !contains(r.regionIn[id-1], v) {
				continue
			}
			for _, m := range frozen {
				if strings.HasPrefix(op.Name, m+".") {
					return true
				}
			}
		}
	}
	return false
}

// retainRecomputeInputs runs when region id's recompute is done: the
// storages of its inputs that require grad, now the detached leaves', are
// taken from their values (the recompute of the region before makes those
// values again, as new tensors) and their gradients marked to be kept
// (keepsGrad); both are freed when the backward ends.
func (d *distState) retainRecomputeInputs(r *Replay, id int32) {
	if !d.retainsRecomputeInputs(r, id) {
		return
	}
	if d.leakedGrad == nil {
		d.leakedGrad = map[core.Value]bool{}
	}
	for _, v := range r.regionIn[id-1] {
		if !r.P.Values[v].Grad {
			continue
		}
		if r.valT[v] != none {
			d.leakedIn = append(d.leakedIn, r.valT[v])
			r.valT[v] = none
		}
		d.leakedGrad[v] = true
	}
}

// releaseRecomputeInputs is FSDP's final callback removing the hooks: the
// retained inputs and gradients are freed.
func (d *distState) releaseRecomputeInputs(r *Replay) {
	if len(d.leakedIn)+len(d.leakedGrads) == 0 {
		return
	}
	prev := r.op
	r.op = "FSDP final callback"
	defer func() { r.op = prev }()
	for _, id := range d.leakedGrads {
		r.release(id)
	}
	for _, id := range d.leakedIn {
		r.release(id)
	}
	d.leakedGrads, d.leakedIn = nil, nil
	clear(d.leakedGrad)
}
