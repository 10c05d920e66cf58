package search

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/timing"
	"github.com/memsh/memsh/sim/units"
)

// zeroOffload says whether a layout of plan p, replayed in sharding mode
// mode, steps its optimizer on the host: ZeRO-Offload
// (replay's distState.ZeroOffload, the search's only offload).
func zeroOffload(p *core.Plan, mode replay.DistMode) bool {
	return mode == replay.DistZeRO && p.Offload != nil && p.Offload.Optimizer != ""
}

// paramsOffloaded says whether a layout of plan p, replayed in sharding
// mode mode, keeps its parameters on the host: ZeRO-3's offload_param
// (replay's zeroParamOffload) or FSDP's CPU offload, FSDP2's or FSDP1's
// (FsdpOffload).
func paramsOffloaded(p *core.Plan, mode replay.DistMode) bool {
	return (mode == replay.DistZeRO || mode == replay.DistFSDP) && p.Offload != nil && p.Offload.Params != ""
}

// offloadSeconds is the PCIe time of ZeRO-Offload's step on a rank
// holding params, and the partition's elements the host steps, as the
// replay counts them (replay/shard_offload.go,
// offloadShard; timing's hostSeconds prices the bytes): stages 1-2 copy
// the fp32 gradients of the rank's flat partition of each group (dense,
// expert; replay.ZeroPartition pads it) down and the updated 16-bit partition
// up; stage 3's partition (each parameter's ceil(numel/degree)) also
// goes down and up in 16 bits at the first micro-step. Every dtype the
// search's precisions copy has a whole byte size, so the sub-groups' sums
// are the sum over the partition.
func offloadSeconds(p *core.Plan, par *core.Parallelism, params paramAgg) (seconds float64, part int64) {
	prec := p.Precision
	if par.Zero == 3 {
		for _, e := range params {
			if e.trainable {
				part += e.n * ceilDiv(e.numel, shardDegree(par, e.expert))
			}
		}
	} else {
		dense, expert := params.numel(true)
		if dense > 0 {
			part += replay.ZeroPartition(dense, shardDegree(par, false))
		}
		if expert > 0 {
			part += replay.ZeroPartition(expert, shardDegree(par, true))
		}
	}
	if part == 0 {
		return 0, 0
	}
	bytes := units.FP32.Bytes(part)
	if par.Zero < 3 || p.Offload.Params == "" { // with offload_param the updated partition stays on the host
		bytes += prec.Params.Bytes(part)
	}
	if par.Zero == 3 {
		bytes += 2 * prec.Grads.Bytes(part)
	} else {
		bytes += replay.AccumulateCopies(p, par.Zero) * prec.Params.Bytes(part) // host gradient accumulation
	}
	return timing.PCIeSeconds(p.Device, bytes), part
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// shardDegree is the data-parallel sharding degree of a parameter: dp x cp,
// or dp x cp / ep for experts (distState.Degree).
func shardDegree(par *core.Parallelism, expert bool) int64 {
	if expert {
		return par.ExpertShardDegree()
	}
	return par.ShardDegree()
}

// minStates is a lower bound of the model states a GPU holding params
// allocates at setup and keeps through the step: the parameters (sharded
// over data parallelism with ZeRO-3 and FSDP), the master weights and
// optimizer state (sharded with ZeRO, FSDP and the distributed optimizer),
// and the persistent gradient buffers (DDP's buckets and Megatron's
// main-gradient buffer hold every gradient; ZeRO-3 its partition).
// Integer division rounds down where the replay pads up.
func minStates(p *core.Plan, mode replay.DistMode, params paramAgg) int64 {
	if paramsOffloaded(p, mode) {
		// The shards, their gradients and optimizer state live on the
		// host; the GPU holds gathered units and copies of the shards
		// only while they are used: no state is kept.
		return 0
	}
	par := &p.Parallel // its degrees as Norm reads them (ShardDegree), without Norm's copies
	prec := p.Precision
	train := p.Phase != core.Eval
	offloaded := zeroOffload(p, mode)
	var total int64
	var degs [2]int64 // dense, expert: worked out at their first parameter
	for _, e := range params {
		k := 0
		if e.expert {
			k = 1
		}
		if degs[k] == 0 {
			degs[k] = shardDegree(par, e.expert)
		}
		deg := degs[k]
		shardP, shardS := int64(1), int64(1)
		switch mode {
		case replay.DistZeRO:
			shardS = deg
			if par.Zero == 3 {
				shardP = deg
			}
		case replay.DistFSDP:
			shardP, shardS = deg, deg
		case replay.DistMegatron:
			if par.DistributedOptimizer {
				shardS = deg
			}
		}
		b := prec.Params.Bytes(e.numel) / shardP
		switch {
		case e.quantWhole > 0 && shardP > 1:
			b = e.quantSplit/shardP + e.quantKept
		case e.quantWhole > 0:
			b = e.quantWhole
		}
		if train && e.trainable && !offloaded { // ZeRO-Offload: master, moments and gradient partition on the host
			var st int64
			if prec.HasMaster() {
				st += prec.Master.Bytes(e.numel)
			}
			st += p.Optimizer.MinStateBytes(e.numel, prec.States)
			b += st / shardS
			switch {
			case mode == replay.DistDDP || mode == replay.DistMegatron:
				b += prec.Grads.Bytes(e.numel)
			case mode == replay.DistZeRO && par.Zero == 3:
				b += prec.Grads.Bytes(e.numel) / deg
			}
		}
		total += e.n * b
	}
	return total
}
