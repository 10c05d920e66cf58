package importers

import (
	"fmt"
	"slices"
)

// torchtitanLayout is the parallelism section's degrees, the shard degree
// resolved against the job's GPUs.
type torchtitanLayout struct {
	replicate, shard, tp, pp, cp, ep int64
	etp                              int64 // v0.2.0's expert_tensor_parallel_degree
	layers                           int64 // the model's transformer layers, 0 from --model
	asyncTP                          bool  // parallelism.enable_async_tensor_parallel with tp > 1 (torchtitanAsyncTP)
	// microBatches is the pipeline's micro-batches per step when the config
	// counts them (the Python configs' num_pp_microbatches); 0 reads
	// pipeline_parallel_microbatch_size, their size in sequences.
	microBatches int64
	noSP         bool // tensor parallelism without sequence parallelism (enable_sequence_parallel = False)
}

func (l torchtitanLayout) dp() int64 { return l.replicate * l.shard }

func torchtitanDegrees(t *tree, o Options) (torchtitanLayout, error) {
	var l torchtitanLayout
	for _, d := range []struct {
		key string
		to  *int64
	}{
		{"parallelism.data_parallel_replicate_degree", &l.replicate}, {"parallelism.tensor_parallel_degree", &l.tp},
		{"parallelism.pipeline_parallel_degree", &l.pp}, {"parallelism.context_parallel_degree", &l.cp},
		{"parallelism.expert_parallel_degree", &l.ep}, {"parallelism.expert_tensor_parallel_degree", &l.etp},
	} {
		n, err := t.integer(d.key, 1, 1, 1<<20)
		if err != nil {
			return l, err
		}
		*d.to = n
	}
	shard, err := t.integer("parallelism.data_parallel_shard_degree", -1, -1, 1<<20)
	if err != nil {
		return l, err
	}
	gpus := o.GPUs * o.Nodes
	others := l.replicate * l.tp * l.pp * l.cp
	switch {
	case shard == 0:
		return l, t.errorf("parallelism.data_parallel_shard_degree", "-1 takes the GPUs left over, 1 disables sharding", "0 is not a degree")
	case shard == -1 && gpus%others != 0:
		return l, t.errorf("parallelism.data_parallel_shard_degree", "say the job's GPUs: --gpus N (per node) and --nodes N",
			"-1 takes the GPUs left over, but %d GPUs do not divide by replicate %d x tp %d x pp %d x cp %d", gpus, l.replicate, l.tp, l.pp, l.cp)
	case shard == -1:
		shard = gpus / others
	case shard*others != gpus:
		return l, t.errorf("parallelism.data_parallel_shard_degree", "torchtitan checks the same: the degrees' product must be the world size (--gpus x --nodes)",
			"replicate %d x shard %d x tp %d x pp %d x cp %d is not the job's %d GPUs", l.replicate, shard, l.tp, l.pp, l.cp, gpus)
	}
	l.shard = shard
	return l, nil
}

// apply sets the parallel layout: FSDP2 over the shard degree, HSDP with
// replicas, DDP with replicas alone, and the TP, PP, CP and EP degrees.
func (l torchtitanLayout) apply(t *tree, o Options, p *plan, batch int64) error {
	reshard, err := t.str("parallelism.fsdp_reshard_after_forward", "default")
	if err != nil {
		return err
	}
	if !slices.Contains([]string{"default", "always", "never"}, reshard) {
		return t.errorf("parallelism.fsdp_reshard_after_forward", "default, always or never", "unknown policy %s", quoteKey(reshard))
	}
	// torchtitan's default, at the benchmarks' 9dec370 (config_manager.py:
	// experimental.context_parallel_rotate_method) as at 6404b93
	rotate, err := t.str("parallelism.context_parallel_rotate_method", "allgather")
	if err != nil {
		return err
	}
	if rotate != "allgather" && rotate != "alltoall" {
		return t.errorf("parallelism.context_parallel_rotate_method", "torchtitan's are allgather and alltoall", "unknown rotate method %s", quoteKey(rotate))
	}
	noLossParallel, err := t.boolean("parallelism.disable_loss_parallel", false)
	if err != nil {
		return err
	}
	for _, k := range []string{"parallelism.pipeline_parallel_split_points", "parallelism.module_fqns_per_model_part"} {
		if v, _ := t.get(k); v != nil {
			t.notModelled = append(t.notModelled, k+": the stages' own layer split (memsh splits them as torchtitan's default does)")
		}
	}
	offload, err := t.boolean("training.enable_cpu_offload", false)
	if err != nil {
		return err
	}
	if o.GPUs*o.Nodes == 1 {
		if offload {
			t.notModelled = append(t.notModelled, "training.enable_cpu_offload: FSDP2's CPU offload, which one GPU without fully_shard does not apply")
		}
		return nil
	}
	args := []string{kw("dp", num(l.dp()))}
	if l.shard > 1 || l.cp > 1 { // torchtitan shards over dp_shard x cp
		args = append(args, kw("fsdp", "True"))
		if l.replicate > 1 {
			args = append(args, kw("dp_replicate", num(l.replicate)))
		}
		// "default" reshards after forward unless pipelining (torchtitan's parallelize: not pp_enabled)
		if reshard == "never" || (reshard == "default" && l.pp > 1) {
			args = append(args, kw("reshard_after_forward", "False"))
		}
	}
	if l.tp > 1 {
		args = append(args, kw("tp", num(l.tp)), kw("sequence_parallel", map[bool]string{false: "True", true: "False"}[l.noSP]))
		// DTensor's ColwiseParallel: the all-gathered input is what the
		// column-parallel linear saves (torchtitan's apply_tp)
		args = append(args, kw("tp_runtime", str("torch")))
		if l.asyncTP {
			args = append(args, kw("async_tp", "True"))
		}
		// torchtitan's loss_parallel_enabled: tp > 1 and not disabled; the
		// output's logits stay sharded over the vocabulary (Shard(-1)) and
		// the loss runs under torch's loss_parallel()
		if noLossParallel {
			t.notModelled = append(t.notModelled, "parallelism.disable_loss_parallel: the output's logits gathered whole on every tensor-parallel rank (memsh keeps them sharded over the vocabulary)")
		} else {
			args = append(args, kw("loss_parallel", str("torch")))
		}
	}
	// v0.2.2's context_parallel_load_balancer (job_config.py:431-437):
	// headtail, the default, gives each rank a head and a tail chunk of
	// the sequence, the even causal work memsh replays
	balancer, hasBalancer := t.get("parallelism.context_parallel_load_balancer")
	if l.cp > 1 && hasBalancer && balancer != "headtail" {
		what := "no load balancing: causal attention's work uneven over the ranks"
		if balancer != nil {
			what = comment(fmt.Sprint(balancer)) + " (FlexAttention's balancer)"
		}
		t.notModelled = append(t.notModelled, "parallelism.context_parallel_load_balancer: "+what)
	}
	if l.cp > 1 {
		args = append(args, kw("cp", num(l.cp)))
		if rotate == "allgather" { // torch's _AllGatherRotater: every rank's keys and values at once
			args = append(args, kw("cp_mode", str("allgather")))
		} else { // _AllToAllRotater: each step's keys and values permuted to the next rank, a ring
			t.notModelled = append(t.notModelled, "parallelism.context_parallel_rotate_method: alltoall (torch's ring: memsh's ring attention, without torch's fp32 merges of the steps' outputs)")
		}
	}
	if l.ep > 1 {
		// torchtitan borrows the expert-parallel ranks from dp_shard x cp
		// (and tp, with etp 1: parallel_dims.py at v0.2.2, efsdp); memsh's
		// ep ranks are data-parallel ranks, which tokens per step count once
		if l.dp()%l.ep != 0 {
			return t.errorf("parallelism.expert_parallel_degree", "memsh takes the expert-parallel ranks from the data-parallel ones; torchtitan also borrows them from "+
				"context_parallel_degree and tensor_parallel_degree, which memsh does not replay: a degree dividing data_parallel_replicate_degree x data_parallel_shard_degree",
				"%d does not divide the data-parallel degree %d (replicate %d x shard %d)", l.ep, l.dp(), l.replicate, l.shard)
		}
		args = append(args, kw("ep", num(l.ep)))
		// distributed/parallel_dims.py at v0.2.2, line 59: etp is 1 or tp. Its
		// default 1 keeps each expert whole over the tensor-parallel ranks
		// ([partial dp + all tp -> ep], job_config.py:464-470): memsh's
		// expert_tp = 1; etp = tp splits the experts like the dense MLP,
		// memsh's default.
		switch {
		case l.etp != 1 && l.etp != l.tp:
			return t.errorf("parallelism.expert_tensor_parallel_degree", "torchtitan asserts the same: 1 or tensor_parallel_degree",
				"%d is neither 1 nor tensor_parallel_degree %d", l.etp, l.tp)
		case l.tp > 1 && l.etp == 1:
			args = append(args, kw("expert_tp", "1"))
		}
		if backend, _ := t.get("parallelism.expert_parallel_comm_backend"); backend != nil && backend != "standard" {
			t.notModelled = append(t.notModelled, "parallelism.expert_parallel_comm_backend: "+comment(fmt.Sprint(backend))+" (DeepEP's kernels and buffers; memsh replays torch's all-to-all)")
		}
	} else {
		t.get("parallelism.expert_parallel_comm_backend") // no effect with ep 1 (job_config.py:474-476)
	}
	if l.pp > 1 {
		pipe, micro, err := l.pipeline(t, batch, l.layers)
		if err != nil {
			return err
		}
		args = append(args, pipe...)
		p.reset("batch", num(micro))
	} else {
		for _, k := range torchtitanPipelineKeys { // read only when pipelining: understood, of no effect at pp 1
			t.get(k)
		}
	}
	// only with DualPipeV and ep > 1 (job_config.py:420-423), a schedule pipeline() refuses
	t.get("parallelism.pipeline_parallel_expert_parallel_overlap")
	p.set("parallel", call("parallel", args...))
	if offload && (l.shard > 1 || l.cp > 1) { // fully_shard's CPUOffloadPolicy: parameters, gradients and the step on the host
		p.offload(kw("params", str("cpu")))
	} else if offload {
		t.notModelled = append(t.notModelled, "training.enable_cpu_offload: FSDP2's CPU offload, without a sharded data-parallel degree")
	}
	p.cluster(o)
	return nil
}
