package importers

import (
	"fmt"
	"strings"
)

// megatronLayout is tp x pp x cp model parallelism and data parallelism
// over the rest of the job's GPUs; the global batch sets the micro-batches.
// extra are more parallel() keywords (Megatron-SWIFT's experts').
func megatronLayout(t *tree, o Options, p *plan, tp, micro int64, megatron bool, extra ...string) error {
	pp, err := t.integer("pipeline-model-parallel-size", 1, 1, 1<<20)
	if err != nil {
		return err
	}
	cp, err := t.integer("context-parallel-size", 1, 1, 1<<20)
	if err != nil {
		return err
	}
	gpus := o.GPUs * o.Nodes
	if gpus%(tp*pp*cp) != 0 {
		return t.errorf("tensor-model-parallel-size", "tp x pp x cp must divide the job's GPUs: --gpus N (per node), --nodes N",
			"%d GPUs do not divide into tp %d x pp %d x cp %d", gpus, tp, pp, cp)
	}
	dp := gpus / (tp * pp * cp)
	global, err := t.integer("global-batch-size", micro*dp, 1, 1<<40)
	if err != nil {
		return err
	}
	if global%(micro*dp) != 0 {
		return t.errorf("global-batch-size", "Megatron asserts the same: a multiple of micro-batch-size x data-parallel size",
			"%d is not a multiple of %d x %d", global, micro, dp)
	}
	n := global / (micro * dp)
	sp, err := t.boolean("sequence-parallel", false)
	if err != nil {
		return err
	}
	distOpt, err := t.boolean("use-distributed-optimizer", false)
	if err != nil {
		return err
	}
	// Megatron's DDP overlaps neither collective unless asked
	// (core_v0.12.0 param_and_grad_buffer.py, distrib_optimizer.py:
	// finish_grad_sync after the backward, the parameter all-gather after
	// the step); memsh overlaps both by default.
	overlapGrads, err := t.boolean("overlap-grad-reduce", false)
	if err != nil {
		return err
	}
	overlapParams, err := t.boolean("overlap-param-gather", false)
	if err != nil {
		return err
	}
	// Megatron's DDP without the distributed optimizer is replayed only
	// under Megatron's runtime (megatronPrecision): in fp32 the reduction
	// is PyTorch DDP's, overlapped.
	ddpAfterBackward := !distOpt && !overlapGrads && dp > 1
	if ddpAfterBackward && !megatron {
		t.notModelled = append(t.notModelled, "no --overlap-grad-reduce: Megatron's DDP reduces the gradients after the backward; memsh overlaps them in fp32 (parallel(overlap_grad_reduce=False) needs precision=\"megatron\" or the distributed optimizer)")
	}
	lossParallel, err := megatronLossParallel(t, tp, gpus > 1 || distOpt, megatron)
	if err != nil {
		return err
	}
	// arguments.py at d98e8a6 (lines 1031-1047, 1118-1190, 1441): other
	// data-parallel runtimes than the DDP and distributed optimizer memsh
	// replays, and Transformer Engine's userbuffers
	if on, _ := t.boolean("use-megatron-fsdp", false); on {
		t.notModelled = append(t.notModelled, "use-megatron-fsdp: Megatron-FSDP's sharded parameters, gradients and optimizer states (data-parallel-sharding-strategy)")
		for _, k := range []string{"data-parallel-sharding-strategy", "fsdp-double-buffer", "fsdp-manual-registration", "use-nccl-ub"} {
			t.get(k) // Megatron-FSDP's own settings, part of it
		}
	}
	// gradient_accumulation_fusion (on by default) writes each linear's weight
	// gradient straight into main_grad; without it a temporary comes first
	t.notModelledIf("no-gradient-accumulation-fusion", "each linear's weight gradient in a temporary before it is added to main_grad")
	t.notModelledIf("use-torch-fsdp2", "torch FSDP2 under Megatron (fully_shard of each layer)")
	t.notModelledIf("tp-comm-overlap", "Transformer Engine's userbuffers overlapping the tensor-parallel collectives with the GEMMs")
	if lvl, err := t.integer("empty-unused-memory-level", 0, 0, 2); err != nil {
		return err
	} else if lvl > 0 {
		t.notModelled = append(t.notModelled, "empty-unused-memory-level: torch.cuda.empty_cache() between steps (memsh keeps the allocator's cache)")
	}
	if pp == 1 && n > 1 {
		p.set("grad_accum", num(n))
	}
	if gpus == 1 && !distOpt && len(extra) == 0 { // one GPU: no layout, unless Megatron's distributed optimizer (of one rank) or the experts' keywords (the router's dtype) run it
		return nil
	}
	args := []string{kw("dp", num(dp))}
	if tp > 1 {
		args = append(args, kw("tp", num(tp)))
		if sp {
			args = append(args, kw("sequence_parallel", "True"))
		}
	}
	if lossParallel != "" {
		args = append(args, kw("loss_parallel", str(lossParallel)))
	}
	if pp > 1 {
		layers, err := t.integer("num-layers", 0, 1, 1<<20)
		if err != nil {
			return err
		}
		pipe, err := megatronPipeline(t, pp, layers, n)
		if err != nil {
			return err
		}
		args = append(args, pipe...)
	} else {
		for _, k := range megatronPipelineFlags { // read only with pipeline stages: understood, of no effect at pp 1
			t.get(k)
		}
	}
	args = append(args, extra...)
	if cp > 1 {
		args = append(args, kw("cp", num(cp)))
		mode, err := megatronCPComm(t)
		if err != nil {
			return err
		}
		if mode != "" {
			args = append(args, kw("cp_mode", str(mode)))
		}
	} else {
		t.get("cp-comm-type") // no effect without context parallelism
	}
	if ddpAfterBackward && megatron {
		args = append(args, kw("overlap_grad_reduce", "False"))
	}
	if distOpt {
		args = append(args, kw("distributed_optimizer", "True"))
		if !overlapGrads {
			args = append(args, kw("overlap_grad_reduce", "False"))
		}
		if !overlapParams {
			args = append(args, kw("overlap_param_gather", "False"))
		}
	}
	p.set("parallel", call("parallel", args...))
	p.cluster(o)
	return nil
}

// megatronCPComm is --cp-comm-type (arguments.py at d98e8a6, line 3221:
// p2p by default, one type or one per layer): p2p is Transformer Engine's
// ring attention, memsh's default "ring"; a2a is Ulysses' all-to-alls,
// "ulysses". TE's all-gather (its own kernels, not torch's
// context_parallel() that memsh's "allgather" replays), the hierarchical
// a2a+p2p and a type per layer are listed as not modelled.
func megatronCPComm(t *tree) (string, error) {
	v, _ := t.get("cp-comm-type")
	var types []string
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		types = []string{x}
	case []any:
		for _, e := range x {
			types = append(types, fmt.Sprint(e))
		}
	default:
		return "", t.errorf("cp-comm-type", "p2p, a2a, allgather or a2a+p2p", "want a type, got %s", describe(v))
	}
	for _, c := range types {
		if c != "p2p" && c != "a2a" && c != "allgather" && c != "a2a+p2p" {
			return "", t.errorf("cp-comm-type", "Megatron's are p2p, a2a, allgather and a2a+p2p", "unknown type %s", quoteKey(c))
		}
	}
	same := true
	for _, c := range types {
		same = same && c == types[0]
	}
	switch {
	case !same:
		t.notModelled = append(t.notModelled, "cp-comm-type: a type per layer ("+comment(strings.Join(types, " "))+"; memsh runs one for every layer, the ring)")
	case types[0] == "a2a":
		return "ulysses", nil
	case types[0] == "allgather":
		t.notModelled = append(t.notModelled, "cp-comm-type: allgather (Transformer Engine's all-gather attention; memsh replays the ring)")
	case types[0] == "a2a+p2p":
		t.notModelled = append(t.notModelled, "cp-comm-type: a2a+p2p (the hierarchical all-to-all and ring; memsh replays the ring)")
	}
	return "", nil
}
