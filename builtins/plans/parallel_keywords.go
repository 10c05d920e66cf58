package plans

import (
	"fmt"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/models"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
)

// layoutKeyword is one keyword of the layout form of parallel(), declared
// once: the signature, `memsh doc parallel`, the layout's attributes and
// sweep()'s parallel.* axes come from layoutKeywords.
type layoutKeyword struct {
	Name string
	Sig  string // the default as the signature writes it
	Doc  string
	// get is the attribute: the value set, or the default; set accepts
	// what get returns (replace() passes it back) and None for the default.
	get func(p core.Parallelism) starlark.Value
	set func(v starlark.Value, p *core.Parallelism) error
}

// layoutKeywords are parallel()'s layout keywords in signature order.
var layoutKeywords = []layoutKeyword{
	degree("dp", "data-parallel ranks (alone: DDP, which saves no memory)", func(p *core.Parallelism) *int64 { return &p.DP }),
	degree("tp", "Megatron tensor parallelism: heads, MLP and vocabulary split over tp ranks", func(p *core.Parallelism) *int64 { return &p.TP }),
	degree("pp", "pipeline stages of the repeated blocks", func(p *core.Parallelism) *int64 { return &p.PP }),
	degree("cp", "context parallelism: each sequence split over cp ranks (ring attention, or Ulysses or torch's all-gather with cp_mode)", func(p *core.Parallelism) *int64 { return &p.CP }),
	degree("ep", "expert parallelism: each MoE's experts split over ep ranks of the dp group", func(p *core.Parallelism) *int64 { return &p.EP }),
	{Name: "expert_tp", Sig: "None",
		Doc: "the experts' tensor parallelism (Megatron's --expert-tensor-parallel-size): None or tp splits each expert's hidden size like the dense MLP's; " +
			"1 keeps experts whole, each tensor-parallel rank routing its own sequence-parallel tokens (needs sequence_parallel); expert gradients and state shard over dp x cp x tp / (ep x expert_tp) ranks",
		get: optionalInt(func(p *core.Parallelism) *int64 { return &p.ETP }),
		set: setDegree("expert_tp", func(p *core.Parallelism) *int64 { return &p.ETP })},
	{Name: "expert_load", Sig: "1.0",
		Doc: `with ep: the routed token copies the busiest rank receives, in balanced shares, sizing the expert all-to-all buffers and the experts' activations; ` +
			`every rank waits for the busiest at the all-to-all, so the experts' GEMMs and all-to-alls are timed at its rows; ` +
			`"worst" is dropless routing's worst case, ep x min(top_k, experts/ep) / top_k (every token of the ep ranks to one rank's experts); ` +
			`a MoE with a capacity factor receives its capacity whatever the load`,
		get: func(p core.Parallelism) starlark.Value {
			if p.ExpertWorst {
				return starlark.String("worst")
			}
			return starlark.Float(max(p.ExpertLoad, 1))
		},
		set: func(v starlark.Value, p *core.Parallelism) error {
			switch x := v.(type) {
			case nil, starlark.NoneType:
			case starlark.String:
				if x != "worst" {
					return fmt.Errorf("expert_load must be a number of balanced shares or \"worst\" (got %q)", string(x))
				}
				p.ExpertWorst = true
			default:
				f, err := host.AsFloat(v, "expert_load")
				if err != nil {
					return err
				}
				if f == 1 {
					f = 0 // balanced, the default
				}
				p.ExpertLoad = f
			}
			return nil
		}},
	{Name: "expert_spread", Sig: "0.0",
		Doc: `with ep and dropless routing: how far the rows a rank's experts receive stray from expert_load's share from one micro-batch and layer to the next, a fraction s; ` +
			`the replay draws each MoE layer's rows in each micro-batch and step from [1-s, 1+s] shares (deterministic), so the caching allocator meets routed buffers of changing sizes, as real routing makes them; ` +
			`memory only: the step is timed at the share. 0 replays every micro-batch at the same rows; expert_load x (1 + s) must stay within the worst case; refused with moe(capacity=...), whose padded rows do not vary`,
		get: func(p core.Parallelism) starlark.Value { return starlark.Float(p.ExpertSpread) },
		set: func(v starlark.Value, p *core.Parallelism) error {
			if v == nil || v == starlark.None {
				return nil
			}
			f, err := host.AsFloat(v, "expert_spread")
			p.ExpertSpread = f
			return err
		}},
	{Name: "zero", Sig: "0", Doc: "DeepSpeed ZeRO stage over dp x cp: 1 optimizer state, 2 and gradients, 3 and parameters",
		get: func(p core.Parallelism) starlark.Value { return starlark.MakeInt(p.Zero) },
		set: func(v starlark.Value, p *core.Parallelism) error {
			z, err := models.OptInt(v, "zero", 0)
			p.Zero = int(z)
			return err
		}},
	{Name: "fsdp", Sig: "False",
		Doc: "PyTorch FSDP over dp x cp: True or 2 is FSDP2 (fully_shard per block of every repeat(), the modules of fsdp_units and the root; " +
			"torchtitan, torchtune), 1 is FSDP1 (FullyShardedDataParallel: one flat parameter per unit, Lightning's FSDPStrategy, " +
			"accelerate; frozen and trainable parameters of a unit share one gradient, and no_sync() keeps unsharded gradients while accumulating). " +
			"With pp, FSDP2 as torch.distributed.pipelining drives it: each model chunk stays gathered from its first forward and holds unsharded " +
			"gradients in reduce_dtype from its first micro-batch's backward to its last, where it is resharded and reduce-scattered",
		get: func(p core.Parallelism) starlark.Value {
			if p.FSDP && p.FSDPVersion != 0 {
				return starlark.MakeInt(p.FSDPVersion)
			}
			return starlark.Bool(p.FSDP)
		},
		set: setFSDP},
	{Name: "dp_replicate", Sig: "1",
		Doc: "HSDP with fsdp: dp ranks form dp_replicate replicas of dp/dp_replicate ranks each; the model is sharded inside a replica " +
			"(over dp/dp_replicate x cp ranks) and its sharded gradients are all-reduced across replicas (torchtitan's data_parallel_replicate_degree)",
		get: func(p core.Parallelism) starlark.Value { return starlark.MakeInt64(max(p.DPReplicate, 1)) },
		set: setDegree("dp_replicate", func(p *core.Parallelism) *int64 { return &p.DPReplicate })},
	{Name: "reshard_after_forward", Sig: "True",
		Doc: "FSDP2: True frees each unit's gathered parameters after its forward and gathers them again for its backward; " +
			"False keeps them until the backward (torchtitan under pipeline parallelism); an int N keeps 1/N of them (a node's share) between the two",
		get: func(p core.Parallelism) starlark.Value {
			switch {
			case p.NoReshard:
				return starlark.False
			case p.ReshardTo > 0:
				return starlark.MakeInt64(p.ReshardTo)
			}
			return starlark.True
		},
		set: setReshard},
	{Name: "fsdp_units", Sig: "[]",
		Doc: `modules wrapped as FSDP units of their own besides the repeated blocks, by name or path ("embed_tokens", "lm_head"): ` +
			`torchtune's custom_sharded_layers, torchtitan's embedding and output units; the rest is the root unit, never resharded after forward. ` +
			`A module the step does not run (a vision tower without images) is a unit never gathered: it holds its shards`,
		get: func(p core.Parallelism) starlark.Value {
			xs := make([]starlark.Value, len(p.FSDPUnits))
			for i, u := range p.FSDPUnits {
				xs[i] = starlark.String(u)
			}
			return starlark.NewList(xs)
		},
		set: func(v starlark.Value, p *core.Parallelism) error {
			if v == nil || v == starlark.None {
				return nil
			}
			names, err := stringList(v, "fsdp_units")
			if len(names) > 0 {
				p.FSDPUnits = names
			}
			return err
		}},
	{Name: "fsdp_adapter_units", Sig: "False",
		Doc: "FSDP1 (fsdp=1) with train(lora=...): True wraps every LoRA adapter linear as an FSDP unit of its own, as peft's " +
			"fsdp_auto_wrap_policy does (Hugging Face accelerate with PEFT, fms-hf-tuning), so a block's unit holds only frozen " +
			"parameters: no flat gradient for them, and FSDP's reshard-only hook (see checkpoint()'s reentrant); always so with " +
			"quant= (the FSDP-QLoRA recipes). False keeps the adapters in their block's unit (Lightning's FSDPStrategy)",
		get: func(p core.Parallelism) starlark.Value { return starlark.Bool(p.AdapterUnits) },
		set: setLayoutBool("fsdp_adapter_units", func(p *core.Parallelism) *bool { return &p.AdapterUnits })},
	{Name: "fsdp_sync_each_batch", Sig: "False",
		Doc: "FSDP1 (fsdp=1) with grad_accum > 1: False accumulates inside no_sync(), the unsharded gradients held and reduce-scattered " +
			"at the last micro-batch only (Lightning, Hugging Face accelerate and Trainer by default); True reduce-scatters every " +
			"micro-batch and accumulates the sharded gradients (accelerate's GradientAccumulationPlugin(sync_each_batch=True), " +
			"Answer.AI's fsdp_qlora without --no_sync). FSDP1 cannot accumulate outside no_sync() with offload(params=\"cpu\")",
		get: func(p core.Parallelism) starlark.Value { return starlark.Bool(p.SyncEachBatch) },
		set: setLayoutBool("fsdp_sync_each_batch", func(p *core.Parallelism) *bool { return &p.SyncEachBatch })},
	{Name: "fsdp_sync_module_states", Sig: "False",
		Doc: "FSDP1 (fsdp=1): FullyShardedDataParallel(sync_module_states=True), the model loaded on rank 0 only (Hugging Face accelerate's " +
			"cpu_ram_efficient_loading, Answer.AI's fsdp_qlora --low_memory, its default): while wrapping, each unit's parameters are " +
			"broadcast from rank 0 in 250 MiB buckets, and the buckets' flattened copies join what the wrap leaves in the allocator's cache",
		get: func(p core.Parallelism) starlark.Value { return starlark.Bool(p.SyncStates) },
		set: setLayoutBool("fsdp_sync_module_states", func(p *core.Parallelism) *bool { return &p.SyncStates })},
	{Name: "fsdp_backward_prefetch", Sig: `"pre"`,
		Doc: `FSDP1 (fsdp=1): FullyShardedDataParallel's backward_prefetch. "pre" (BACKWARD_PRE, its default; Lightning's FSDPStrategy): ` +
			`a unit's pre-backward gathers the unit before it too, two units unsharded through each backward; "post" (BACKWARD_POST, ` +
			`MosaicML Composer's default): the next unit is gathered once this one reshards, before its gradient's reduce-scatter; ` +
			`"none" (NO_PREFETCH, the Hugging Face Trainer's and accelerate's default unless fsdp_config sets backward_prefetch): ` +
			`each unit is gathered by its own pre-backward`,
		get: func(p core.Parallelism) starlark.Value {
			if !p.FSDP || p.FSDPVersion != 1 {
				return starlark.None
			}
			return starlark.String(p.FSDP1Prefetch())
		},
		set: func(v starlark.Value, p *core.Parallelism) error {
			switch s := v.(type) {
			case nil, starlark.NoneType:
			case starlark.String:
				p.BackwardPrefetch = string(s)
			default:
				return fmt.Errorf("fsdp_backward_prefetch must be a string (got %s)", s.Type())
			}
			return nil
		}},
	{Name: "fsdp_forward_prefetch", Sig: "False",
		Doc: "FSDP1 (fsdp=1): FullyShardedDataParallel(forward_prefetch=True) (accelerate's fsdp_forward_prefetch, the Hugging Face Trainer's " +
			"fsdp_config forward_prefetch): each unit's pre-forward gathers the next unit too, and in the backward autograd runs a unit's " +
			"post-backward (reshard, reduce-scatter) only after the backward of the unit before it, so each unit's parameters and flat " +
			"gradient stay unsharded through one more unit's backward (docs/sharding.md)",
		get: func(p core.Parallelism) starlark.Value { return starlark.Bool(p.ForwardPrefetch) },
		set: setLayoutBool("fsdp_forward_prefetch", func(p *core.Parallelism) *bool { return &p.ForwardPrefetch })},
	{Name: "fsdp_no_sync", Sig: "False",
		Doc: "FSDP2 (fsdp=True) with grad_accum > 1: True accumulates without gradient sync, set_requires_gradient_sync(False) on the " +
			"micro-batches that do not step (Hugging Face accelerate 1.11 and later, accumulate() without sync_each_batch): each parameter's " +
			"unsharded gradient kept in reduce_dtype between micro-batches, one reduce-scatter a step; False reduce-scatters every micro-batch " +
			"and accumulates the sharded gradients (torchtitan)",
		get: func(p core.Parallelism) starlark.Value { return starlark.Bool(p.FSDPNoSync) },
		set: setLayoutBool("fsdp_no_sync", func(p *core.Parallelism) *bool { return &p.FSDPNoSync })},
	fsdpDType("param_dtype", "FSDP's MixedPrecisionPolicy: the dtype parameters are all-gathered and computed in (None: the autocast dtype of a mixed precision, else the parameters'; Lightning 2.1-2.5's FSDPStrategy under bf16-mixed is param_dtype=\"fp32\", reduce_dtype=\"bf16\", its 2.0 and 2.6+ the default)",
		func(p *core.Parallelism) *units.DType { return &p.FSDPParamDType }),
	fsdpDType("reduce_dtype", "FSDP's MixedPrecisionPolicy: the dtype gradients are reduce-scattered in (None: FSDP2 the precision's gradient dtype, torchtitan's float32; FSDP1 param_dtype, as MixedPrecision and accelerate's policy do)",
		func(p *core.Parallelism) *units.DType { return &p.FSDPReduceDType }),
	{Name: "cp_mode", Sig: `"ring"`,
		Doc: `how context parallelism runs attention: "ring" (Megatron/TransformerEngine ring attention: K/V chunks passed around the cp ranks, ` +
			`double-buffered, overlapped with the kernel) or "ulysses" (DeepSpeed Ulysses: all-to-alls give each rank the whole sequence for ` +
			`a cp-th of the heads; each tensor-parallel rank's heads and key-value heads must divide by cp) or "allgather" (torch's context_parallel() as ` +
			`torchtitan runs it, PyTorch 2.6: every layer all-gathers the keys and values of all cp ranks at once and merges the steps' outputs in fp32; ` +
			`its backward gathers them again and passes fp32 key/value gradients around the ring)`,
		get: func(p core.Parallelism) starlark.Value {
			if p.CPMode == "" {
				return starlark.String("ring")
			}
			return starlark.String(p.CPMode)
		},
		set: func(v starlark.Value, p *core.Parallelism) error {
			switch s := v.(type) {
			case nil, starlark.NoneType:
			case starlark.String:
				p.CPMode = string(s)
			default:
				return fmt.Errorf("cp_mode must be a string (got %s)", s.Type())
			}
			return nil
		}},
	{Name: "loss_parallel", Sig: `"megatron"`,
		Doc: `with tp: how the cross-entropy runs over the vocabulary-sharded logits: "megatron" (Megatron's vocab-parallel cross-entropy, in place: ` +
			`one fp32 copy of the logits shard, saved, becomes the gradient), "megatron_fused" (the same under Megatron's --cross-entropy-loss-fusion, ` +
			`its steps compiled: the backward clones the fp32 softmax, 4 bytes a logit more), "te" (Transformer Engine's parallel_cross_entropy, ` +
			`Megatron's --cross-entropy-fusion-impl te: the gradient written over the logits in the forward, no fp32 copy; ` +
			`both also at tp 1 under precision="megatron") ` +
			`or "torch" (torch.distributed.tensor.parallel.loss_parallel(), ` +
			`as torchtitan runs it with tp: eager DTensor code whose forward holds the shifted logits and their exponentials beside the fp32 input, ` +
			`and whose backward holds the saved log-probabilities, zeros_like of them, their exponentials and the gradient at once)`,
		get: func(p core.Parallelism) starlark.Value {
			if p.LossParallel == "" {
				return starlark.String("megatron")
			}
			return starlark.String(p.LossParallel)
		},
		set: func(v starlark.Value, p *core.Parallelism) error {
			switch s := v.(type) {
			case nil, starlark.NoneType:
			case starlark.String:
				p.LossParallel = string(s)
			default:
				return fmt.Errorf("loss_parallel must be a string (got %s)", s.Type())
			}
			return nil
		}},
	{Name: "pp_runtime", Sig: `"megatron"`,
		Doc: `with pp: what the pipeline runtime keeps: "megatron" (Megatron's schedules: a stage's sent output is freed after the send, ` +
			`each received activation and gradient is a fresh tensor freed after use) or "torch" (torch.distributed.pipelining as PyTorch 2.6 runs it, ` +
			`torchtitan's: receive buffers for the activations and gradients of every micro-batch, allocated once and kept; each micro-batch's ` +
			`output kept until the step ends, the last stage's logits too, concatenated at the end of step(); each received activation's gradient ` +
			`kept until the next step)`,
		get: func(p core.Parallelism) starlark.Value {
			if p.PPRuntime == "" {
				return starlark.String("megatron")
			}
			return starlark.String(p.PPRuntime)
		},
		set: func(v starlark.Value, p *core.Parallelism) error {
			switch s := v.(type) {
			case nil, starlark.NoneType:
			case starlark.String:
				p.PPRuntime = string(s)
			default:
				return fmt.Errorf("pp_runtime must be a string (got %s)", s.Type())
			}
			return nil
		}},
	{Name: "tp_runtime", Sig: `"megatron"`,
		Doc: `with tp and sequence_parallel: what a column-parallel linear saves for its weight gradient: "megatron" (Megatron's linears: ` +
			`the sequence-sharded input, all-gathered again in the backward) or "torch" (DTensor's ColwiseParallel and PrepareModuleInput, ` +
			`torchtitan's: the input all-gathered before the matmul, saved whole; the linears of one module input share it)`,
		get: func(p core.Parallelism) starlark.Value {
			if p.TPRuntime == "" {
				return starlark.String("megatron")
			}
			return starlark.String(p.TPRuntime)
		},
		set: func(v starlark.Value, p *core.Parallelism) error {
			switch s := v.(type) {
			case nil, starlark.NoneType:
			case starlark.String:
				p.TPRuntime = string(s)
			default:
				return fmt.Errorf("tp_runtime must be a string (got %s)", s.Type())
			}
			return nil
		}},
	{Name: "sequence_parallel", Sig: "False", Doc: "with tp: norms, dropout and residuals sharded along the sequence (Korthikanti et al. 2022)",
		get: func(p core.Parallelism) starlark.Value { return starlark.Bool(p.SequenceParallel) },
		set: setLayoutBool("sequence_parallel", func(p *core.Parallelism) *bool { return &p.SequenceParallel })},
	{Name: "schedule", Sig: `"1f1b"`,
		Doc: `the pipeline schedule: "1f1b"; "interleaved" with virtual_stages model chunks per GPU (Megatron); "zb-h1" (zero bubble: ` +
			`the backward split into input and weight gradients, the weight gradients deferred into the bubble, 1F1B's memory); "zb-v" ` +
			`(zero bubble in a V: two chunks per GPU, the first GPU holding the first and the last, 1F1B's first-stage memory on every GPU); ` +
			`"dualpipe" (DeepSeek-V3: micro-batches from both ends, every GPU holding two stages, so parameters twice and pp+1 micro-batches ` +
			`in flight; pp and micro_batches even). r.time_breakdown["bubble"] is the fill and drain`,
		get: func(p core.Parallelism) starlark.Value { return starlark.String(p.Norm().Schedule) },
		set: func(v starlark.Value, p *core.Parallelism) error {
			switch s := v.(type) {
			case nil, starlark.NoneType:
			case starlark.String:
				p.Schedule = string(s)
			default:
				return fmt.Errorf("schedule must be a string (got %s)", s.Type())
			}
			return nil
		}},
	degree("virtual_stages", "model chunks per GPU of the interleaved schedule", func(p *core.Parallelism) *int64 { return &p.VirtualStages }),
	{Name: "micro_batches", Sig: "None", Doc: "micro-batches per step and pipeline (None: the plan's grad_accum; at most 2^24)",
		get: func(p core.Parallelism) starlark.Value {
			if p.MicroBatches == 0 {
				return starlark.None
			}
			return starlark.MakeInt64(p.MicroBatches)
		},
		set: setDegree("micro_batches", func(p *core.Parallelism) *int64 { return &p.MicroBatches })},
	{Name: "stage_layers", Sig: "None",
		Doc: `uneven pipeline stages: a list of layer counts, one per model chunk in chunk order (chunk g runs on stage g mod pp; ` +
			`only the first and the last chunk, with the embedding and with the output layer and loss, may hold none), or "torchtitan": ` +
			`its generated split points (the first chunk n div chunks layers, the following ones one more while the remainder lasts, the last the rest)`,
		get: func(p core.Parallelism) starlark.Value {
			switch {
			case len(p.StageLayers) > 0:
				xs := make([]starlark.Value, len(p.StageLayers))
				for i, k := range p.StageLayers {
					xs[i] = starlark.MakeInt64(k)
				}
				return starlark.NewList(xs)
			case p.StageSplit != "":
				return starlark.String(p.StageSplit)
			}
			return starlark.None
		},
		set: setStageLayers},
	{Name: "first_stage_layers", Sig: "None",
		Doc: "Megatron's --decoder-first-pipeline-num-layers: layers on the first pipeline stage; the stages between the first and the last share the rest evenly",
		get: optionalInt(func(p *core.Parallelism) *int64 { return &p.FirstStageLayers }),
		set: setDegree("first_stage_layers", func(p *core.Parallelism) *int64 { return &p.FirstStageLayers })},
	{Name: "last_stage_layers", Sig: "None", Doc: "Megatron's --decoder-last-pipeline-num-layers: layers on the last pipeline stage",
		get: optionalInt(func(p *core.Parallelism) *int64 { return &p.LastStageLayers }),
		set: setDegree("last_stage_layers", func(p *core.Parallelism) *int64 { return &p.LastStageLayers })},
	{Name: "account_for_embedding", Sig: "False",
		Doc: "Megatron's --account-for-embedding-in-pipeline-split: the embedding counts as one layer of the even split, so the first chunk holds one layer fewer " +
			"(Llama 3 405B: 126 layers on pp=16 with both slots, 8 per stage, 7 on the first and the last)",
		get: func(p core.Parallelism) starlark.Value { return starlark.Bool(p.EmbeddingSlot) },
		set: setLayoutBool("account_for_embedding", func(p *core.Parallelism) *bool { return &p.EmbeddingSlot })},
	{Name: "account_for_loss", Sig: "False",
		Doc: "Megatron's --account-for-loss-in-pipeline-split: the output layer and loss count as one layer, so the last chunk holds one layer fewer",
		get: func(p core.Parallelism) starlark.Value { return starlark.Bool(p.LossSlot) },
		set: setLayoutBool("account_for_loss", func(p *core.Parallelism) *bool { return &p.LossSlot })},
	{Name: "distributed_optimizer", Sig: "False", Doc: "Megatron's distributed optimizer: fp32 master weights and Adam state sharded over dp x cp",
		get: func(p core.Parallelism) starlark.Value { return starlark.Bool(p.DistributedOptimizer) },
		set: setLayoutBool("distributed_optimizer", func(p *core.Parallelism) *bool { return &p.DistributedOptimizer })},
	{Name: "overlap_grad_reduce", Sig: "True",
		Doc: "Megatron's --overlap-grad-reduce: the gradient reduction runs behind the backward; False (Megatron's own default): it runs whole after the backward, exposed",
		get: func(p core.Parallelism) starlark.Value { return starlark.Bool(!p.NoOverlapGradReduce) },
		set: setLayoutNotBool("overlap_grad_reduce", func(p *core.Parallelism) *bool { return &p.NoOverlapGradReduce })},
	{Name: "overlap_param_gather", Sig: "True",
		Doc: "Megatron's --overlap-param-gather: the distributed optimizer's parameter all-gather runs behind the next forward; False (Megatron's own default): it runs after the optimizer step, exposed",
		get: func(p core.Parallelism) starlark.Value { return starlark.Bool(!p.NoOverlapParamGather) },
		set: setLayoutNotBool("overlap_param_gather", func(p *core.Parallelism) *bool { return &p.NoOverlapParamGather })},
	{Name: "overlap_comm", Sig: "False",
		Doc: "with zero=1 or 2: DeepSpeed's zero_optimization.overlap_comm (off by default at those stages; ZeRO-3 always overlaps): each reduce bucket's reduction, and with offload(optimizer=\"cpu\") its gradients' copies to and from the host (the fp32 copy at the step's last micro-step, the 16-bit accumulation copies at each), runs on a side stream behind the micro-step's backward, exposed only where it outlasts it (each micro-step's last bucket at least; stage 2 reduces at every micro-step, stage 1 at the last), with a second reduce bucket allocated (double buffering); the copies overlap into pinned host memory, DeepSpeed's offload_optimizer.pin_memory (the default from 0.19.5; before it, pageable copies held the CPU: leave overlap_comm off to time them)",
		get: func(p core.Parallelism) starlark.Value { return starlark.Bool(p.OverlapComm) },
		set: setLayoutBool("overlap_comm", func(p *core.Parallelism) *bool { return &p.OverlapComm })},
	zeroSize("reduce_bucket_size", "with zero=: DeepSpeed's zero_optimization.reduce_bucket_size, elements (None: DeepSpeed's 5e8): the gradient bucket ZeRO-1/2 allocate at each backward "+
		"(and a second with overlap_comm) and ZeRO-3 at init, in the parameters' 16-bit dtype; \"auto\" is the Hugging Face Trainer's fill, hidden_size² "+
		"(transformers' integrations/deepspeed.py; the model's token embedding width)",
		func(p *core.Parallelism) *core.ZeroSize { return &p.ReduceBucketSize }),
	zeroSize("stage3_prefetch_bucket_size", "with zero=3: the parameters ZeRO-3 gathers ahead of the module that runs, elements (None: DeepSpeed's 5e7; 0 prefetches nothing); "+
		"\"auto\" is the Trainer's 0.9 x hidden_size²",
		func(p *core.Parallelism) *core.ZeroSize { return &p.PrefetchBucketSize }),
	zeroSize("stage3_param_persistence_threshold", "with zero=3: modules with fewer parameters stay gathered on every rank, elements (None: DeepSpeed's 1e5); "+
		"\"auto\" is the Trainer's 10 x hidden_size",
		func(p *core.Parallelism) *core.ZeroSize { return &p.ParamPersistenceThreshold }),
	zeroSize("stage3_max_live_parameters", "with zero=3: ZeRO-3 prefetches no further once this many parameters are gathered, elements (None: DeepSpeed's 1e9; 0 prefetches nothing, as Axolotl's ZeRO-3 configs set it)",
		func(p *core.Parallelism) *core.ZeroSize { return &p.MaxLiveParameters }),
	{Name: "async_tp_comm", Sig: "True",
		Doc: "with precision=\"megatron\": the backward of a column-parallel linear runs its input gradient's all-reduce (reduce-scatter with sequence parallelism) beside its weight-gradient GEMM, and with sequence parallelism the all-gather of its saved input beside its input-gradient GEMM (Megatron-LM since 2021-08-30); False: a release before that, every tensor-parallel collective exposed",
		get: func(p core.Parallelism) starlark.Value { return starlark.Bool(!p.SyncTPComm) },
		set: setLayoutNotBool("async_tp_comm", func(p *core.Parallelism) *bool { return &p.SyncTPComm })},
	{Name: "tp_comm_overlap", Sig: "False",
		Doc: "with precision=\"megatron\" and sequence_parallel=True: Megatron's --tp-comm-overlap (Transformer Engine's userbuffers): the forward's all-gathers and reduce-scatters and the backward's all-gathers of the row-parallel linears' output gradient run in chunks beside their GEMMs, exposed only where they outlast them (Megatron's default: False)",
		get: func(p core.Parallelism) starlark.Value { return starlark.Bool(p.TPCommOverlap) },
		set: setLayoutBool("tp_comm_overlap", func(p *core.Parallelism) *bool { return &p.TPCommOverlap })},
	{Name: "async_tp", Sig: "False",
		Doc: `with tp_runtime="torch", sequence_parallel=True and compile=True: torch's micro-pipeline tensor parallelism (async TP; torchtitan's enable_async_tensor_parallel), ` +
			`an Inductor pass that fuses each sequence-parallel all-gather with the matmuls reading it and each matmul with the reduce-scatter of its output, ` +
			`passing the chunks through a symmetric-memory workspace (r.overheads' symm_mem_tp: outside the caching allocator, so in device_used, not in reserved memory) ` +
			`and running half of their GEMMs on a backend stream, whose cuBLAS workspaces the caching allocator keeps apart (r.breakdown's async_tp_stream). ` +
			`The step time prices the collectives as without it`,
		get: func(p core.Parallelism) starlark.Value { return starlark.Bool(p.AsyncTP) },
		set: setLayoutBool("async_tp", func(p *core.Parallelism) *bool { return &p.AsyncTP })},
	{Name: "loss_dp_group", Sig: "False",
		Doc: "with Megatron's layer: the loss is all-reduced over the data-parallel group without context parallelism (Megatron's DATA_PARALLEL_GROUP), a communicator of its own beside the gradients', its NCCL buffers in device_used: Megatron-LM's pretrain_gpt.py loss_func and --calculate-per-token-loss before Megatron-Core 0.13, and ms-swift's Megatron trainer with those releases; False: Megatron-Core 0.13 and later, which reduce over the gradients' group",
		get: func(p core.Parallelism) starlark.Value { return starlark.Bool(p.LossDPGroup) },
		set: setLayoutBool("loss_dp_group", func(p *core.Parallelism) *bool { return &p.LossDPGroup })},
	{Name: "grad_norm_group", Sig: "False",
		Doc: "with Megatron's layer: Megatron-Core 0.14 and later, whose distributed optimizer all-reduces the gradient norm over a world-sized group of its own (INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP), one more communicator (nccl_dist_opt, with distributed_optimizer=True) beside the default group's (nccl_world); False: before 0.14, the norm over the default group",
		get: func(p core.Parallelism) starlark.Value { return starlark.Bool(p.GradNormGroup) },
		set: setLayoutBool("grad_norm_group", func(p *core.Parallelism) *bool { return &p.GradNormGroup })},
	{Name: "unpermute_probs", Sig: "False",
		Doc: "with precision=\"megatron\" and grouped experts: Megatron-Core before 0.13, whose alltoall dispatcher applies the routing weights in the unpermute, keeping the experts' outputs for their gradient; False: Megatron-Core 0.13 and later, which apply them in the experts' SwiGLU",
		get: func(p core.Parallelism) starlark.Value { return starlark.Bool(p.UnpermuteProbs) },
		set: setLayoutBool("unpermute_probs", func(p *core.Parallelism) *bool { return &p.UnpermuteProbs })},
	{Name: "permute_fusion", Sig: "True",
		Doc: "with precision=\"megatron\" and grouped experts: Megatron's --moe-permute-fusion, Transformer Engine's fused permute, unpermute and chunk sort; False: the dispatcher's torch permute, whose masked_select reads a count on the host: two more host syncs a MoE layer's forward (time.md, \"Megatron-Core's MoE host syncs\")",
		get: func(p core.Parallelism) starlark.Value { return starlark.Bool(!p.NoPermuteFusion) },
		set: setLayoutNotBool("permute_fusion", func(p *core.Parallelism) *bool { return &p.NoPermuteFusion })},
	{Name: "shared_expert_overlap", Sig: "False",
		Doc: "with precision=\"megatron\": Megatron-Core's --moe-shared-expert-overlap, the shared experts beside the token dispatcher; their linears read an all-gather made before them, so under sequence parallelism the up projection keeps the gathered input, not the shard; they run on a stream of their own, whose pools (r.breakdown's shared_expert_stream) and cuBLAS workspaces the caching allocator keeps apart",
		get: func(p core.Parallelism) starlark.Value { return starlark.Bool(p.SharedExpertOverlap) },
		set: setLayoutBool("shared_expert_overlap", func(p *core.Parallelism) *bool { return &p.SharedExpertOverlap })},
	{Name: "router_dtype", Sig: "None",
		Doc: `with precision="megatron": Megatron-Core's --moe-router-dtype, "fp32" or "fp64": the MoE router casts its input and weight to it for the gating GEMM ` +
			`(keeping that copy of its input for the weight gradient) and its probs come out in it; under expert tensor parallelism the experts' outputs are ` +
			`reduce-scattered (and their gradient all-gathered) in it; None (Megatron's default): the router in its input's dtype. ` +
			`A model without moe(), or a moe() running HF's per-expert loop with Mixtral's router (impl="loop", router="softmax": an nn.Linear gate, no TopKRouter), is an error`,
		get: func(p core.Parallelism) starlark.Value {
			if p.RouterDType != units.InvalidDType {
				return starlark.String(p.RouterDType.Name())
			}
			return starlark.None
		},
		set: func(v starlark.Value, p *core.Parallelism) error {
			switch x := v.(type) {
			case nil, starlark.NoneType:
				p.RouterDType = units.InvalidDType
			case starlark.String:
				switch string(x) {
				case "fp32":
					p.RouterDType = units.FP32
				case "fp64":
					p.RouterDType = units.FP64
				default:
					return fmt.Errorf("router_dtype must be \"fp32\", \"fp64\" or None, as Megatron's --moe-router-dtype (got %q)", string(x))
				}
			default:
				return fmt.Errorf("router_dtype must be \"fp32\", \"fp64\" or None (got %s)", v.Type())
			}
			return nil
		}},
}

// ParallelLayoutFn is the layout form of parallel(): keywords only,
// checked by the engine where parallel() is written.
func ParallelLayoutFn(b *starlark.Builtin, kwargs []starlark.Tuple) (starlark.Value, error) {
	var p core.Parallelism
	seen := map[string]bool{}
	for _, kv := range kwargs {
		name := string(kv[0].(starlark.String))
		k := layoutKeyword{}
		for _, x := range layoutKeywords {
			if x.Name == name {
				k = x
			}
		}
		if k.set == nil {
			return nil, unknownLayoutKeyword(b.Name(), name)
		}
		if seen[name] {
			return nil, fmt.Errorf("%s: got multiple values for keyword argument %q", b.Name(), name)
		}
		seen[name] = true
		if err := k.set(kv[1], &p); err != nil {
			return nil, err
		}
	}
	if err := p.Validate(); err != nil {
		return nil, err // the engine's checks of a layout, where parallel() is written
	}
	return Parallel{p}, nil
}

// ReplaceLayout is the layout p with some keywords changed, checked as
// parallel() checks it (sweep()'s parallel.* axes).
func ReplaceLayout(p core.Parallelism, changes []starlark.Tuple) (starlark.Value, error) {
	kw := make([]starlark.Tuple, 0, len(layoutKeywords)+len(changes))
	for _, k := range layoutKeywords {
		changed := false
		for _, c := range changes {
			changed = changed || string(c[0].(starlark.String)) == k.Name
		}
		if !changed {
			kw = append(kw, starlark.Tuple{starlark.String(k.Name), k.get(p)})
		}
	}
	return ParallelLayoutFn(starlark.NewBuiltin("parallel", nil), append(kw, changes...))
}
