package timing

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Muon's step of its matrices (core/muon.go): torch.optim.Muon runs one
// matrix at a time, eagerly: eight elementwise kernels (buf.lerp_, the
// Nesterov lerp, the bf16 copy, the norm and its clamp, div_, the
// weight's mul_ and add_; seven without Nesterov) and three matrix
// products a Newton-Schulz iteration, each priced as the GEMM it is (bf16
// operands and output), with K. Jordan's reference form five elementwise
// kernels more an iteration (core.Optimizer.MuonIterationPointwise). Its
// AdamW steps the other parameters as optimizer.go prices AdamW.

// MuonWork is Muon's step of its matrices on one GPU.
type MuonWork struct {
	Tensors  float64 // matrices (also in OptimizerWork's, whose gradients they are)
	Elements float64 // their elements
	Traffic  float64 // HBM bytes of the elementwise ops (replay.MuonTraffic)
	GEMM     float64 // seconds of the Newton-Schulz products
	Kernels  float64 // kernels launched
	Gather   float64 // seconds of Megatron's all-gathers of the TP shards (duplicated mode)
}

// addMuon adds p, one of Muon's matrices (traffic b), to w's Muon work;
// its gradient stays in w's tensors and elements (gradients.go), out of
// its AdamW's launches.
func (w *OptimizerWork) addMuon(plan *core.Plan, p *core.ParamInfo, b float64) {
	w.Muon.Traffic += b
	w.Muon.Tensors++
	w.Muon.Elements += float64(p.Numel)
	ops := 8.0
	if !plan.Optimizer.Nesterov {
		ops = 7
	}
	steps := float64(plan.Optimizer.NSSteps)
	pk, pe := plan.Optimizer.MuonIterationPointwise(p.Shape) // the reference form's scaled sums
	w.Muon.Kernels += ops + steps*float64(3+pk)
	w.Muon.Traffic += steps * float64(units.BF16.Bytes(pe))
	for _, g := range core.MuonGEMMs(p.Shape) {
		t, _ := gemmTime(&plan.Device, units.BF16, 1, float64(g[0]), float64(g[1]), float64(g[2]), 2, 2)
		w.Muon.GEMM += steps * t
	}
}

// addMuonEmerging adds one matrix of local shape s of p under
// emerging_optimizers' form, Megatron-LM's Muon (core/muon_megatron.go,
// traffic b from replay.MuonEmergingTraffic), to w's Muon work and to
// its tensors and elements: eleven elementwise kernels (the weight
// decay's add_, lerp_, the norm, its clamp_min and div, the bf16 and
// fp32 copies, the two scalings, add_, the copy into the model's
// parameter), the Nesterov lerp and the gathered shards' cat where they
// run, and 3 x ns_steps bf16 GEMMs of the matrix orthogonalized, the
// whole matrix on every TP rank in the duplicated mode, after an
// all-gather of its fp32 shards over the TP group (one collective a
// matrix, on the step's stream: nothing overlaps it).
func (w *OptimizerWork) addMuonEmerging(plan *core.Plan, p *core.ParamInfo, s []int64, b float64) {
	o := plan.Muon()
	n := float64(core.Numel(s))
	w.Tensors++
	w.Elements += n
	w.Muon.Tensors++
	w.Muon.Elements += n
	w.Muon.Traffic += b
	ops := 11.0
	if o.Nesterov {
		ops++
	}
	tp := plan.MuonTPRanks(p)
	whole, gathered := o.MuonGathered(p, s, tp)
	if gathered {
		ops++
	}
	steps := float64(o.NSSteps)
	w.Muon.Kernels += ops + 3*steps
	for _, g := range core.MuonGEMMs(whole) {
		t, _ := gemmTime(&plan.Device, units.BF16, 1, float64(g[0]), float64(g[1]), float64(g[2]), 2, 2)
		w.Muon.GEMM += steps * t
	}
	if gb := o.MuonGatherBytes(p, s, tp); gb > 0 { // tp > 1: the TP group's (expert_tp is 1 or tp)
		w.Muon.Gather += collectiveSeconds(plan, "all_gather", "tp", units.FP32.Bytes(core.Numel(whole)))
	}
}

// muonTime is the GPU and CPU time of Muon's work m.
func muonTime(plan *core.Plan, m MuonWork) (gpu, cpu float64) {
	if m.Kernels == 0 {
		return 0, 0
	}
	s, _ := streamTime(&plan.Device, m.Traffic)
	return max(s+m.GEMM, m.Kernels*kernelFloor) + m.Gather, m.Kernels * eagerFwdCPU
}
