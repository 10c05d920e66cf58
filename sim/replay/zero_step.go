package replay

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// DeepSpeed ZeRO's step on the GPU, before its fused Adam updates the
// master partition in place, read from DeepSpeed 0.19.8 (stage3.py,
// stage_1_and_2.py, zero/utils.py) and measured on the CPU by
// tools/oracle/zero_reduce.py (sim/zero_reduce_test.go):
//
//   - the gradient norm (get_grad_norm_direct, every stage): each
//     gradient of the rank's partition (ZeRO-3: each parameter's
//     partition; ZeRO-1/2: each parameter's slice of the flat partition)
//     copied to get_norm_dtype(), fp64 on CUDA (zero/utils.py: double
//     where the accelerator supports it), and its norm taken: one copy
//     alive at a time, the largest the most;
//   - the flattened gradients: ZeRO-3 per sub-group
//     (_prepare_fp32_grad_for_sub_group: self.flatten of the sub-group's
//     partitions, a torch.cat in the gradients' dtype, then .to(fp32)
//     unless it is fp32 already; the cat freed as the statement ends, the
//     fp32 copy kept through the sub-group's update), ZeRO-1/2 per flat
//     group (step: the same flatten and cast of averaged_gradients,
//     single_grad_partition).
//
// Each is an elementwise kernel over the shard, which sim/timing prices
// (zero_step.go there).

// normDType is get_norm_dtype() on CUDA.
const normDType = units.FP64

// zeroStep is DeepSpeed's step: the norm's copy, then the flattened
// gradients and their casts, each allocated and freed as DeepSpeed does.
func (d *distState) zeroStep(r *Replay) {
	prec := r.Plan.Precision
	master := prec.ZeroMaster()
	if d.Par.Zero == 3 {
		// Not with offload_optimizer, whose partitions reach the host in
		// the backward (its norm is taken there).
		offloaded := d.ZeroOffload(r)
		if !offloaded {
			d.normCopy(r, d.zero3LargestPartition())
		}
		d.zeroSubGroups(func(sub, _ int64) {
			flat := int32(none)
			if !offloaded {
				flat = d.alloc(r, "flat gradient of sub-group", []int64{sub}, prec.Grads, prec.Grads.Bytes(sub), core.CatTemporaries, "the gradient partition of one sub-group flattened (stage3.py _prepare_fp32_grad_for_sub_group)")
			}
			if offloaded || prec.Grads != master {
				cast := d.alloc(r, master.String()+" gradient of sub-group", []int64{sub}, master, master.Bytes(sub), core.CatTemporaries, master.String()+" copy of the gradient partition of one sub-group (stage3.py)")
				if flat != none {
					r.release(flat)
				}
				flat = cast
			}
			r.release(flat)
		})
		return
	}
	if d.ZeroOffload(r) {
		d.offloadStep12(r) // the step runs on the host
		return
	}
	if d.bf16opt {
		return // the optimizer steps a view of the fp32 buffer (zero_accum.go)
	}
	if d.zg != nil {
		d.normCopy(r, d.zg.maxSlice)
	}
	for k, g := range d.groups(true) {
		n := ZeroPartition(g.numel, g.n)
		dt := d.zeroFlatDType(r, k)
		flat := d.alloc(r, g.name+" flat gradient partition", []int64{n}, dt, dt.Bytes(n), core.CatTemporaries, "flattened gradient partition (DeepSpeed step)")
		fp32 := int32(none)
		if dt != master {
			fp32 = d.alloc(r, g.name+" "+master.String()+" gradient partition", []int64{n}, master, master.Bytes(n), core.CatTemporaries, master.String()+" copy of the gradient partition for the optimizer (single_grad_partition)")
		}
		r.release(flat)
		if k == len(d.groups(true))-1 && d.zg != nil {
			d.zeroFree(r)
		}
		if fp32 != none {
			r.release(fp32)
		}
	}
}

// zeroFlatDType is ZeRO-1/2's flattened partition's dtype for flat group
// k: torch.cat of the list promotes to the accumulation dtype where it
// holds one (zero_grads.go).
func (d *distState) zeroFlatDType(r *Replay, k int) units.DType {
	if d.zg != nil && d.zg.wide[k] {
		return r.Plan.Precision.Grads
	}
	return r.Plan.Precision.Params
}

// normCopy is the norm's largest copy of one gradient, n elements.
func (d *distState) normCopy(r *Replay, n int64) {
	if n > 0 {
		r.release(d.alloc(r, "gradient in fp64 for the norm", []int64{n}, normDType, normDType.Bytes(n), core.CatTemporaries,
			"one gradient of the partition copied to fp64 for its norm (DeepSpeed get_grad_norm_direct, get_norm_dtype)"))
	}
}

// zeroSubGroups calls f with each ZeRO-3 sub-group of trainable
// partitions: its elements and parameters, in order (sub_group_size).
func (d *distState) zeroSubGroups(f func(sub, params int64)) {
	var sub, n int64
	for pi := range d.p.Params {
		p := &d.p.Params[pi]
		if p.TiedTo >= 0 || !p.Trainable {
			continue
		}
		sub += ceilDiv(p.Numel, d.Degree(int32(pi)))
		n++
		if sub >= zeroSubGroup {
			f(sub, n)
			sub, n = 0, 0
		}
	}
	if sub > 0 {
		f(sub, n)
	}
}

// zero3LargestPartition is the largest trainable parameter's partition,
// elements.
func (d *distState) zero3LargestPartition() int64 {
	var most int64
	for pi := range d.p.Params {
		p := &d.p.Params[pi]
		if p.TiedTo < 0 && p.Trainable {
			most = max(most, ceilDiv(p.Numel, d.Degree(int32(pi))))
		}
	}
	return most
}
