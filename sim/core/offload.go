package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// Offload moves model states or activations off the GPU.
//
//   - Optimizer "cpu" (ZeRO-Offload, DeepSpeed offload_optimizer, with
//     ZeRO stage 1-3: replay/shard_offload.go; DeepSpeed offloads nothing
//     at stage 0, so memsh refuses it without zero=): the fp32 master
//     weights, the optimizer moments (fp32, DeepSpeedCPUAdam) and an fp32
//     copy of the gradients live in host memory and the step runs on the
//     CPU. "nvme" (ZeRO-Infinity, which swaps master, moments and fp32
//     gradients to NVMe through pinned host buffers: replay/offload_nvme.go)
//     runs with ZeRO stage 3 only in DeepSpeed: refused with a hint
//     otherwise.
//   - Params "cpu" (ZeRO-3 offload_param: replay/shard_offload.go; FSDP2's
//     CPUOffloadPolicy: replay/fsdp_offload.go; FSDP1's
//     CPUOffload(offload_params=True): replay/fsdp1_offload.go): the parameter
//     partitions live in pinned host memory and are copied to the GPU
//     before each gather. FSDP (1 and 2) moves the gradients and the
//     optimizer with them: its step runs on the host. DeepSpeed picks the
//     parameters' and the optimizer's devices independently (stage3.py
//     _configure_offloading at edaa722): with params= alone the fp32
//     master, optimizer state and gradient partition stay on the GPU
//     (_create_fp32_partitions), the step runs there and the updated
//     partition is copied back to the host (shard_offload.go
//     paramOnlyStepCopy); optimizer="cpu" or "nvme" moves the optimizer
//     too. DeepSpeed offloads parameters with ZeRO stage 3 only, so
//     params= without zero=3 or fsdp= is refused; "nvme" keeps up to
//     max_in_cpu elements of the partition in pinned host memory and the
//     rest on NVMe (replay/offload_nvme.go).
//   - Activations "cpu" (torch.autograd.graph.save_on_cpu(pin_memory=True),
//     torchtune's OffloadActivations): a tensor saved for backward is
//     copied to pinned host memory once the forward has no more use for it
//     and copied back just before the backward op that needs it; the GPU
//     keeps in-flight tensors only. Parameters and tensors under 1 KiB
//     stay (torchtune min_offload_size), and so does what the output
//     projection and the loss save: torchtune runs only the model under
//     the hooks and the output projection under a NoOpManager. PCIe: 2x
//     the offloaded bytes; host memory: each copy a pinned block rounded
//     up to a power of two (CachingHostAllocator).
//
// Host memory needed is reported per GPU (Report.HostMemory, with a
// breakdown); Plan.HostMemory, when set, is the host RAM of one node and
// the step fails when the GPUs of a node need more.
type Offload struct {
	Optimizer   string // "", cpu, nvme
	Params      string // "", cpu, nvme
	Activations string // "", cpu
	// SyncCopies: the activations' copies run on the compute stream
	// (torchtune's OffloadActivations(use_streams=False), the recipes'
	// activation_offloading_use_streams: False); by default they run on
	// a side stream and overlap the compute (sim/timing/offload.go).
	SyncCopies bool
}

// Validate checks the tiers.
func (o *Offload) Validate() error {
	for _, f := range []struct{ what, v string }{{"optimizer", o.Optimizer}, {"params", o.Params}} {
		switch f.v {
		case "", "cpu", "nvme":
		default:
			return fmt.Errorf("offload: unknown %s tier %q (known: cpu, nvme)", f.what, f.v)
		}
	}
	switch o.Activations {
	case "", "cpu":
	default:
		return fmt.Errorf("offload: unknown activations tier %q (known: cpu)", o.Activations)
	}
	if o.SyncCopies && o.Activations == "" {
		return &units.Error{Path: "offload", Msg: "streams=False is torchtune's use_streams=False, for offloaded activations only",
			Hint: "offload(activations=\"cpu\", streams=False), or drop streams="}
	}
	return nil
}

// validateShardedOffload says which offload and sharding combinations are
// simulated: the ZeRO optimizer on the CPU, for any stage, parameters on
// the CPU with ZeRO-3, either on NVMe with ZeRO-3 (ZeRO-Infinity), FSDP2's
// CPUOffloadPolicy and FSDP1's CPUOffload(offload_params=True). DeepSpeed offloads
// through its ZeRO optimizer only, so a plan without zero= (or fsdp=)
// that offloads parameters or optimizer state is refused.
func (p *Plan) validateShardedOffload(par Parallelism) error {
	o := p.Offload
	if o == nil || (o.Optimizer == "" && o.Params == "") {
		return nil
	}
	switch {
	case par.FSDP && o.Params == "":
		// FSDP1's CPUOffload has one knob, offload_params (it "offloads
		// gradients to CPU as well"), and FSDP2's CPUOffloadPolicy none:
		// neither moves the optimizer state alone.
		return &units.Error{Path: "parallel", Msg: "FSDP offloads parameters, gradients and optimizer state together: use offload(params=\"cpu\")",
			Hint: "fully_shard(offload_policy=CPUOffloadPolicy()) and FullyShardedDataParallel(cpu_offload=CPUOffload(offload_params=True)) have no optimizer-only offload"}
	case par.FSDP && par.SyncEachBatch && p.GradAccum > 1:
		// _flat_param.py prepare_gradient_for_backward (pytorch/pytorch
		// fe03cf693c): "Gradient accumulation outside `no_sync()` does not
		// work with CPU offloading" (the host gradient shard cannot be
		// added to the GPU one).
		return &units.Error{Path: "parallel", Msg: "FSDP1 with offload(params=\"cpu\") accumulates gradients inside no_sync() only, and fsdp_sync_each_batch=True with grad_accum > 1 accumulates outside it",
			Hint: "drop fsdp_sync_each_batch (fsdp_qlora sets --no_sync with --use_cpu_offload and gradient accumulation)"}
	case par.FSDP && (o.Params == "nvme" || o.Optimizer == "nvme"):
		return &units.Error{Path: "parallel", Msg: "FSDP offloads to CPU memory only (got an nvme tier)",
			Hint: `NVMe is DeepSpeed's ZeRO-Infinity: parallel(dp=..., zero=3) with offload(params="nvme", optimizer="nvme"); FSDP's CPU offload is offload(params="cpu")`}
	case par.FSDP && par.FSDPNoSync:
		// The synchronising micro-batch's copies of the gradient shards to
		// the host (once a step) are not replayed for FSDP2.
		return &units.Error{Path: "parallel", Msg: "fsdp_no_sync= with offload(params=\"cpu\") is not modelled: memsh replays FSDP2's CPU offload reduce-scattering every micro-batch",
			Hint: "drop fsdp_no_sync (the sharded gradients on the host accumulate every micro-batch), or the offload"}
	case par.FSDP:
		return nil
	case par.DistributedOptimizer:
		return &units.Error{Path: "parallel", Msg: "offload of parameters or optimizer state is not simulated together with distributed_optimizer= yet"}
	case par.Zero == 0 && o.Params != "":
		// offload_param is "valid only with stage 3" (DeepSpeed's
		// runtime/zero/config.py and offload_config.py at edaa722;
		// docs/_pages/config-json.md: "Available only with ZeRO stage 3"):
		// only stage3.py partitions parameters onto the offload device.
		return &units.Error{Path: "offload", Msg: fmt.Sprintf("offload(params=%q) is DeepSpeed's offload_param, which runs with ZeRO stage 3 only (a config without stage 3 trains with its parameters on the GPU)", o.Params),
			Hint: `add parallel(zero=3) with offload(params="cpu", optimizer="cpu") (on one GPU, parallel(dp=1, zero=3)); FSDP2's CPUOffloadPolicy is parallel(fsdp=True) with offload(params="cpu")`}
	case par.Zero == 0 && o.Optimizer == "nvme":
		// NVMe offload of the optimizer "is available only with ZeRO stage
		// 3" (config-json.md, offload_optimizer, at edaa722); stage 0
		// builds no ZeRO optimizer at all (engine.py).
		return &units.Error{Path: "offload", Msg: `offload(optimizer="nvme") is DeepSpeed's ZeRO-Infinity, whose NVMe offload runs with ZeRO stage 3 only (a stage-0 config ignores offload_optimizer)`,
			Hint: `offload(optimizer="cpu") with parallel(zero=2) (on one GPU, parallel(dp=1, zero=2)) is ZeRO-Offload; ZeRO-Infinity is parallel(zero=3) with offload(optimizer="nvme")`}
	case par.Zero == 0 && o.Optimizer == "cpu":
		// DeepSpeed's engine builds the ZeRO optimizer, the only one that
		// reads offload_optimizer, for stages 1-3 only (runtime/engine.py
		// _do_optimizer_sanity_check, at edaa722): a stage-0 config trains
		// on the GPU. One GPU offloads with stage 1 or 2 at dp=1.
		return &units.Error{Path: "offload", Msg: `offload(optimizer="cpu") is DeepSpeed's ZeRO-Offload, which runs through its ZeRO optimizer only (a stage-0 config ignores offload_optimizer)`,
			Hint: "add parallel(zero=2) (on one GPU, parallel(dp=1, zero=2)): each reduce bucket's gradients go to the host during the backward; zero=1 keeps the full 16-bit gradients on the GPU until the backward ends"}
	case par.Zero == 0:
		return nil
	case o.Optimizer != "" && p.Optimizer.Kind != Adam && p.Optimizer.Kind != AdamW && p.Optimizer.Kind != Lion:
		// With offload_optimizer the engine takes DeepSpeedCPUAdam or
		// DeepSpeedCPULion only: a client optimizer of another type
		// raises ZeRORuntimeException ("You are using ZeRO-Offload with a
		// client provided optimizer", runtime/engine.py
		// _configure_basic_optimizer, 2040-2044 at edaa722) unless the
		// config sets zero_force_ds_cpu_optimizer false, and a ds-config
		// optimizer of those types is built as them.
		return &units.Error{Path: "offload", Msg: fmt.Sprintf("offload(optimizer=%q) steps DeepSpeed's CPU Adam or Lion only (got %s): DeepSpeed refuses a client optimizer of another type with offload_optimizer", o.Optimizer, p.Optimizer.Kind),
			Hint: "use adamw() (DeepSpeedCPUAdam) or lion(), or keep the optimizer on the GPU (DeepSpeed's zero_force_ds_cpu_optimizer: false runs a client optimizer on the host, which memsh does not price)"}
	case o.Params != "" && par.Zero < 3:
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("offload(params=...) needs zero=3 (got zero=%d)", par.Zero),
			Hint: "DeepSpeed offloads parameters with ZeRO stage 3 only (offload_param)"}
	case o.Optimizer == "nvme" && par.Zero < 3:
		// config-json.md: NVMe offloading "is available only with ZeRO
		// stage 3"; stage_1_and_2.py sets cpu_offload for any
		// offload_optimizer device but none, so nvme runs as cpu there.
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("offload(optimizer=\"nvme\") needs zero=3 (got zero=%d): DeepSpeed's stages 1-2 keep the optimizer state in host memory whatever the device", par.Zero),
			Hint: "offload(optimizer=\"cpu\") is what stages 1-2 run (ZeRO-Offload)"}
	}
	return nil
}
