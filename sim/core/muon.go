package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// Muon (torch.optim.Muon, PyTorch 2.9 and later; torch/optim/_muon.py at
// torch 2.15) steps a 2-D matrix by the orthogonalized momentum:
//
//	buf.lerp_(grad, 1 - momentum)                 in place
//	update = grad.lerp(buf, momentum)             a new tensor, grad's dtype (nesterov; else buf itself)
//	X = update.to(bfloat16, copy=True)            transposed (a view) when rows > columns
//	X.div_(X.norm())
//	ns_steps times:
//	    gram = X @ X.T                            k x k, k the smaller dimension
//	    gram_update = addmm(gram, gram, gram)     k x k
//	    X = addmm(X, gram_update, X)              a new k x N
//	param.mul_(1 - lr*wd); param.add_(X)
//
// one parameter at a time ("Foreach is not supported for Muon yet"). Its
// only state is momentum_buffer, zeros_like the gradient. torch's Muon
// refuses a parameter that is not 2-D, and every Muon recipe (K. Jordan's
// MuonWithAuxAdam, Moonshot's Moonlight, the torch docs' example) steps
// the others with AdamW; the recipes keep the embedding and the output
// head on AdamW too. memsh's muon() is that hybrid: Muon on the 2-D
// parameters other than the embedding and the head, AdamW (Impl, foreach
// by default) on the rest.
//
// The step's transient memory is the largest matrix's, at the last addmm
// of an iteration: update, X, gram, gram_update and the new X alive at
// once (MuonStepTemporaries).
//
// K. Jordan's reference implementation (KellerJordan/Muon muon.py), which
// Moonshot's Moonlight, LLaMA-Factory's use_muon
// (src/llamafactory/third_party/muon/muon.py at ff6d4d12e) and Axolotl's
// contribs copy, writes the iteration as expressions (NS "reference"):
//
//	X = G.bfloat16(); X = X / (X.norm() + eps)
//	A = X @ X.T
//	B = b * A + c * A @ A
//	X = a * X + B @ X
//
// so at its last statement A, B, a * X, B @ X and their sum are alive
// beside X: three k x N bf16 tensors more where torch's addmm makes one,
// and five more elementwise kernels an iteration. Its Nesterov update is
// g.add(buf, alpha=momentum), a new tensor as torch's lerp is.
//
// tools/oracle/muon_step.py measures both forms' live tensors on the CPU.

// MuonDefaultNSSteps is torch.optim.Muon's ns_steps default.
const MuonDefaultNSSteps = 5

// MuonMatrix reports whether o steps p by Muon's orthogonalized update
// (not its AdamW).
func (o Optimizer) MuonMatrix(p *ParamInfo) bool {
	return o.Kind == Muon && len(o.MuonMatrixShape(p)) == 2 && p.Role != RoleEmbed && p.Role != RoleLMHead
}

// ParamStates is p's optimizer state in dtype dt: Muon's momentum buffer
// for its matrices, StateTensors by shape otherwise.
func (o Optimizer) ParamStates(p *ParamInfo, dt units.DType) StateTensors {
	if o.MuonMatrix(p) {
		return stateTensors(StateTensor{"momentum_buffer", dt.Bytes(p.Numel)})
	}
	return o.StateTensors(p.Shape, p.Numel, dt)
}

// MuonTemporary is one of the step's transient tensors.
type MuonTemporary struct {
	Name  string
	Shape []int64
	DType units.DType
}

// MuonStepTemporaries are the tensors alive at the peak of stepping p,
// whose gradient is in grad: the Nesterov update in grad's dtype, the
// bf16 iterate, its Gram matrix and the Gram update, and the next
// iterate.
func (o Optimizer) MuonStepTemporaries(p *ParamInfo, grad units.DType) []MuonTemporary {
	if o.NS == MuonEmerging { // Megatron-LM's at tp 1 (muon_megatron.go: MuonPieceTemporaries), one expert's matrix at a time
		return o.MuonPieceTemporaries(p, o.MuonMatrixShape(p), 1)
	}
	k, n := muonDims(p.Shape)
	var out []MuonTemporary
	if o.Nesterov {
		out = append(out, MuonTemporary{"update", []int64{p.Shape[0], p.Shape[1]}, grad})
	}
	if o.NS == MuonReference {
		return append(out,
			MuonTemporary{"X", []int64{k, n}, units.BF16},
			MuonTemporary{"A", []int64{k, k}, units.BF16},
			MuonTemporary{"B", []int64{k, k}, units.BF16},
			MuonTemporary{"a * X", []int64{k, n}, units.BF16},
			MuonTemporary{"B @ X", []int64{k, n}, units.BF16},
			MuonTemporary{"X next", []int64{k, n}, units.BF16})
	}
	return append(out,
		MuonTemporary{"X", []int64{k, n}, units.BF16},
		MuonTemporary{"gram", []int64{k, k}, units.BF16},
		MuonTemporary{"gram_update", []int64{k, k}, units.BF16},
		MuonTemporary{"X next", []int64{k, n}, units.BF16})
}

// MuonReference is NS's value for K. Jordan's reference form.
const MuonReference = "reference"

// MuonIterationPointwise is the elementwise work of one Newton-Schulz
// iteration of a parameter of shape s: kernels, and elements read plus
// written. torch's addmm form has none (the scaled sums are the GEMMs'
// epilogues); the reference form computes b * A, c * (A @ A) and their
// sum, a * X and its sum with B @ X.
func (o Optimizer) MuonIterationPointwise(s []int64) (kernels, elements int64) {
	if o.NS != MuonReference {
		return 0, 0
	}
	k, n := muonDims(s)
	return 5, (2+2+3)*k*k + (2+3)*k*n
}

// MuonGEMMs are one Newton-Schulz iteration's matrix products of a
// parameter of shape s, as (m, n, k) of an m x k by k x n product.
func MuonGEMMs(s []int64) [3][3]int64 {
	k, n := muonDims(s)
	return [3][3]int64{
		{k, k, n}, // X @ X.T
		{k, k, k}, // gram @ gram
		{k, n, k}, // gram_update @ X
	}
}

// muonDims is the smaller and the larger dimension of a matrix.
func muonDims(s []int64) (k, n int64) {
	return min(s[0], s[1]), max(s[0], s[1])
}

// validateMuon checks Muon's settings, and that no other optimizer has
// them.
func (o Optimizer) validateMuon() error {
	if o.Kind != Muon {
		if o.NSSteps != 0 || o.Nesterov || o.NS != "" || o.MuonTP != "" {
			return fmt.Errorf("ns_steps, newton_schulz, nesterov and tp_mode are Muon's (muon()), not %s's", o.Kind)
		}
		return nil
	}
	if o.NS != "" && o.NS != MuonReference && o.NS != MuonEmerging {
		return fmt.Errorf("newton_schulz %q is not a form memsh knows: \"torch\" (torch.optim.Muon's addmm), \"reference\" (K. Jordan's expressions) or \"emerging\" (Megatron-LM's emerging_optimizers)", o.NS)
	}
	if o.NSSteps < 1 || o.NSSteps >= 100 { // torch: "Number of steps must be less than 100"
		return fmt.Errorf("ns_steps must be in [1, 100) (got %d): torch.optim.Muon refuses 100 or more", o.NSSteps)
	}
	if o.InBackward {
		return fmt.Errorf("muon() in the backward is not modelled: torch.optim.Muon steps after the backward")
	}
	return nil
}

// validateMuonLayout refuses Muon where memsh's shards would step it
// wrongly: torch.optim.Muon orthogonalizes whole matrices, so ZeRO, FSDP
// and tensor parallelism (which shard them) need a gather or a
// distributed Newton-Schulz that memsh replays under Megatron-LM's
// runtime only (its emerging_optimizers Muon gathers the TP shards,
// muon_megatron.go; its distributed optimizer becomes the layer-wise one,
// muon_layerwise.go); data parallel (DDP) steps whole matrices on every
// rank.
func (p *Plan) validateMuonLayout() error {
	if err := p.validateMuonMegatron(); err != nil {
		return err
	}
	if p.Optimizer.Kind != Muon || p.Phase == Eval {
		return nil
	}
	par := p.Parallel.Norm()
	what := ""
	switch {
	case par.Zero > 0:
		what = "zero="
	case par.FSDP:
		what = "fsdp="
	case p.Offload != nil:
		what = "offload="
	case p.Precision.Megatron:
		if p.Precision.Params == units.FP16 { // _get_megatron_emerging_optimizer
			return &units.Error{Path: "train", Msg: "muon() with fp16 parameters under Megatron-LM: \"emerging optimizer with fp16 is not supported\"",
				Hint: "bf16 parameters (--bf16), or adam"}
		}
		return nil
	case par.DistributedOptimizer:
		what = "distributed_optimizer=True"
	case par.TP > 1:
		what = "tp="
	case par.PP > 1:
		what = "pp="
	case par.EP > 1:
		what = "ep="
	case par.CP > 1:
		what = "cp="
	}
	if what == "" {
		return nil
	}
	hint := "parallel(dp=N) alone, or adamw() for the sharded layout"
	if what != "zero=" && what != "fsdp=" && what != "offload=" {
		hint = `precision="megatron" (Megatron-LM's Muon, which gathers the TP shards), parallel(dp=N) alone, or adamw()`
	}
	return &units.Error{Path: "train", Msg: "muon() with " + what + ": Muon orthogonalizes whole matrices, and memsh replays torch.optim.Muon on unsharded parameters only (one GPU or data parallel), Megatron-LM's under tp, pp, ep, cp and dp",
		Hint: hint}
}
