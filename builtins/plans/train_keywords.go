package plans

import (
	"fmt"
	"slices"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
)

// keyword is one argument of train(), declared once. train()'s signature,
// its defaults, `memsh doc train`, a plan's attributes, plan.replace() and
// sweep()'s axes all come from trainKeywords; adding a keyword is one
// entry here plus the engine code that models it.
type keyword struct {
	Name string
	Def  starlark.Value // the default; nil for the required model
	Sig  string         // the default as the signature writes it, when not def's repr
	Doc  string
	// set resolves the keyword's value v (others in a, already resolved
	// when they come earlier in the table) into p, and stores the
	// canonical value back in v so that replace() can re-run it.
	set func(name string, v *starlark.Value, a *trainArgs, p *core.Plan) error
}

// trainKeywords are train()'s arguments in signature order.
var TrainKeywords = []keyword{
	{Name: "model", Doc: "the model to train (model(), a stdlib zoo model or hf_config())", set: setModel},
	{Name: "batch", Def: starlark.MakeInt(1), Doc: "the micro-batch per GPU: sequences (or samples) per forward",
		set: setInt(func(p *core.Plan) *int64 { return &p.Batch })},
	{Name: "seq", Def: starlark.None, Doc: "tokens per sequence (the padded length); required for models that read tokens",
		set: setSeq},
	{Name: "grad_accum", Def: starlark.MakeInt(1), Doc: "micro-batches per optimizer step; > 1 keeps gradients between micro-batches",
		set: setInt(func(p *core.Plan) *int64 { return &p.GradAccum })},
	{Name: "members", Def: starlark.MakeInt(1), Doc: "ensemble members of a graph model",
		set: setInt(func(p *core.Plan) *int64 { return &p.Members })},
	{Name: "members_mode", Def: starlark.String("stacked"), Doc: `"stacked" folds members into the batch (anemoi), "sequential" runs them one at a time, "spread" runs one member per GPU group (anemoi's ensemble parallelism: dp counts the groups) and gathers the members' predictions for the loss`,
		set: setString(func(p *core.Plan) *string { return &p.MembersMode })},
	{Name: "precision", Def: starlark.String("fp32"),
		Doc: "a policy name (fp32, bf16-mixed, fp16-mixed, bf16, fp16, megatron, fp16-master) or precision(...)", set: setPrecision},
	{Name: "optimizer", Def: Optimizer{defaultOptimizer(core.AdamW)}, Sig: "adamw()",
		Doc: "an optimizer value (adamw(), sgd(momentum=0.9), adamw8bit(), ...) or its name", set: setOptimizer},
	{Name: "checkpoint", Def: starlark.String("none"), Doc: `activation checkpointing: "none", "full", "selective", "op" (torchtitan's per-op policy) or checkpoint(...)`,
		set: setCheckpoint},
	{Name: "compile", Def: starlark.False,
		Doc: `torch.compile: True compiles each repeated block and the loss (torchtune's compile=True), "blocks" the blocks only (torchtitan's training.compile), "loss" the loss only. ` +
			`AOTAutograd's min-cut partitioner picks what each compiled graph saves (matmul and attention outputs kept, cheap pointwise ops recomputed in the backward) ` +
			`and Inductor fuses pointwise chains, which then hold no intermediates and read and write memory once; ` +
			`the compiled backward makes each linear's weight gradient before its input gradient (its saved input freed in between) ` +
			`and writes an activation's input gradient over its output's (docs/device-memory.md)`,
		set: setCompile},
	{Name: "compile_mode", Def: starlark.String("default"),
		Doc: `torch.compile's mode: "default", "reduce-overhead" or "max-autotune" (which replay the compiled graphs as CUDA graphs), "max-autotune-no-cudagraphs". ` +
			`Under CUDA graphs every compiled graph, forward and backward, allocates from one private pool of CUDA graph trees that the ordinary pools never share (r.breakdown's cuda_graph_pool row), ` +
			`and each graph's inputs that are neither parameters nor outputs of another graph are copied into it; modelled on one GPU for a step of one micro-batch`,
		set: setString(func(p *core.Plan) *string { return &p.Compile.Mode })},
	{Name: "float8", Def: starlark.None,
		Doc: `torchao's float8 training (convert_to_float8_training): "tensorwise" or "rowwise" dynamic scaling. Every linear but the output head and those with a dimension not a multiple of 16 (torchtitan's filter; r.notes names the latter) becomes a Float8Linear: ` +
			`its forward casts the input and the weight to fp8 (abs, amax, an fp32 scaled copy, clamp, the fp8 copy: transients in eager mode, one fused kernel each under compile) and multiplies with torch._scaled_mm at the GPU's fp8 rate; ` +
			`it saves the high-precision input and the weight as autograd would (nothing in fp8), and its backward casts grad_output twice, the weight and the input again and copies operands into the layouts _scaled_mm takes. ` +
			`With tensor parallelism (tp_runtime="torch", "tensorwise") they are torchtitan's Float8ColwiseParallel and Float8RowwiseParallel (torchao eab345c): each block's input cast to fp8 before the sequence-parallel all-gather, the fp8 input and fp8 weight saved. ` +
			`Needs a GPU with fp8 tensor cores; not with quant=, lora= or Megatron's tensor parallelism. ` +
			`"te-delayed" or "te-tensorwise" (Megatron's --fp8-recipe delayed or tensorwise) are Transformer Engine's fp8 linears as Megatron-Core runs them instead (q/k/v, the attention projection, fc1, fc2; not the output layer): ` +
			`each keeps an fp8 copy of its weight (and on Hopper its transpose) across micro-batches and steps, quantizes its input once (rowwise for the GEMM, a transposed copy saved for the weight gradient; with sequence parallelism the fp8 shard, gathered in fp8), ` +
			`saves nothing in bf16, and quantizes grad_output with both usages; GEMMs at the fp8 rate. ` +
			`Routed experts run as Megatron's TEGroupedMLP (moe impl="grouped" under precision="megatron"; other impls, MXFP8, blockwise and fp8_param_gather with experts are refused): an fp8 workspace (and on Hopper its transpose) per expert, the permuted rows quantized together with their transposed copy saved, each expert's rows padded to a multiple of 16, four multi-stream cuBLAS workspaces. ` +
			`"te-mxfp8" (--fp8-recipe mxfp8, Blackwell only) scales each block of 32 elements with an e8m0 byte and keeps a second quantized copy, not a transpose, of every tensor read both ways (input, grad_output, weight), with its scales; widths and rows multiples of 32. "te-blockwise" (--fp8-recipe blockwise, Hopper only) scales activations and gradients per 1x128 block and weights per 128x128 block in fp32, and gathers sequence-parallel inputs in bf16, saving the local bf16 input`,
		set: setFloat8},
	{Name: "fp8_amax_history", Def: starlark.MakeInt(1),
		Doc: `with float8="te-delayed": the amax history length of Transformer Engine's delayed scaling (Megatron's --fp8-amax-history-len, default 1): each TE module keeps [length, 3] and [length, 2] fp32 histories`,
		set: setInt(func(p *core.Plan) *int64 { return &p.Float8.AmaxHistory })},
	{Name: "fp8_param_gather", Def: starlark.False,
		Doc: `with a Transformer Engine float8= recipe and distributed_optimizer=True: Megatron's --fp8-param-gather, Transformer Engine's fp8 primary weights (fp8_model_init): ` +
			`every TE linear's weight is stored in fp8 (one byte an element, Megatron's uint8 param buffer) and all-gathered in fp8 after the optimizer step, with no bf16 copy and no separate fp8 workspace; ` +
			`the distributed optimizer keeps the fp32 main weights as before; on Hopper the weight's transpose is still kept. ` +
			`With "te-mxfp8" the weight is its MXFP8 copies (both usages) and is gathered in bf16 through the gradient buffer (reuse_grad_buf_for_mxfp8_param_ag); not with "te-blockwise"`,
		set: setBool(func(p *core.Plan) *bool { return &p.Float8.ParamGather })},
	{Name: "fsdp_float8_all_gather", Def: starlark.False,
		Doc: `with float8="tensorwise" and FSDP2: the float8 linears' weights are cast to fp8 before the all-gather (torchao's enable_fsdp_float8_all_gather, with precompute_float8_dynamic_scale_for_fsdp): ` +
			`half the gathered bytes and buffers, and the forward casts no weight`,
		set: setBool(func(p *core.Plan) *bool { return &p.Float8.AllGather })},
	{Name: "float8_auto_filter", Def: starlark.False,
		Doc: `with float8=: torchao's _auto_filter_for_recipe (torchtitan's filter_fqns entry "auto_filter_small_kn") also leaves in high precision the linears too small to gain from fp8: ` +
			`tensorwise K <= 4096 and N <= 1024 (in and out features), rowwise N <= 2048, K <= 1024, or N <= 4096 and K <= 2048 (Llama 3 8B's k and v projections, 4096 -> 1024, under tensorwise)`,
		set: setBool(func(p *core.Plan) *bool { return &p.Float8.AutoFilter })},
	{Name: "qat", Def: starlark.None,
		Doc: `quantization-aware training as torchao runs it (docs/qat.md): "8da4w" is Int8DynActInt4WeightQATQuantizer (torchtune's QAT recipes, Axolotl's qat: block with int8 activations and int4 weights): ` +
			`every nn.Linear whose in_features qat_group_size divides, the output head included (qat_head), fake-quantizes its input per token to int8 and its weight per group to int4 in each forward: ` +
			`fp32 copies of both (the product with 1/scale, its rounding, the zero point added, the clamp), clamp's fp32 input saved for backward beside the fake-quantized input and weight F.linear saves, ` +
			`in place of the linear's own input. Under lora= only the adapted linears (torchtune's QATLoRALinear: the frozen weight fake-quantized without autograd). ` +
			`"int8-int4" is Axolotl's qat: block with activation_dtype int8 and weight_dtype int4 (torchao's QATConfig: the same activations, Int4WeightFakeQuantizeConfig weights): every nn.Linear, each weight fake-quantized asymmetrically per group with autograd through its scales (an fp32 copy, its shifted, rounded and centred fp32 copies saved); not with lora=. ` +
			`Refused: "4w" (weights only), "nvfp4", "mxfp4", "fp8"; with float8=, quant=, compile=, tensor parallelism, or autocast over fp32 weights`,
		set: setQAT},
	{Name: "qat_group_size", Def: starlark.MakeInt(256),
		Doc: `with qat=: the weights' group size (torchao's groupsize, 256 by default); a linear whose in_features it does not divide stays a plain linear (_replace_linear_8da4w's filter)`,
		set: setInt(func(p *core.Plan) *int64 { return &p.QAT.GroupSize })},
	{Name: "qat_head", Def: starlark.True,
		Doc: `with qat=: False leaves the output head a plain linear, as torchtune's tied head (TiedLinear, no nn.Linear) is left; True (torchao's default) swaps it when it is an nn.Linear`,
		set: setQATHead},
	{Name: "lora", Def: starlark.None, Doc: "lora(...) trains adapters over frozen weights", set: setLoRA},
	{Name: "quant", Def: starlark.None, Doc: `"nf4", "nf4-dq" or "int8": quantized frozen base weights (bitsandbytes: every nn.Linear but lm_head, an MoE's nn.Linear experts and router included; fused experts stay in 16 bit; "int8" is LLM.int8 as bitsandbytes 0.45 and later run it: the row-major int8 weight with an fp32 scale a row, each input cast to fp16 and quantized row-wise, the int32 product dequantized to fp16 and cast to the input's dtype, the input kept for backward, which multiplies by a copy of the weight in that dtype; outlier columns, which depend on the data, taken as none; bf16 or fp16, fp16 only under Lightning, LitGPT's models); "torchao-nf4": torchao's NF4Tensor (torchtune's QLoRA, sharded by fsdp=True)`, set: setQuant},
	{Name: "gpu", Def: starlark.String("H100-80GB"), Doc: "a catalog name or gpu(...)", set: setGPU},
	{Name: "phase", Def: starlark.String("train"), Doc: `"train", or "eval" (a forward without gradients)`,
		set: setPhase},
	{Name: "runtime", Def: starlark.String("cuda"),
		Doc: `"cuda" (PyTorch 2.11 and later on CUDA: SDPA runs cuDNN's attention on Hopper), "cuda-2.10" (torch 2.8 to 2.10: SDPA runs flash-attn 2's kernel), "cuda-2.6" (torch 2.6: index_select copies fp16 and bf16 rows an element at a time, pytorch#152380), "cuda-2.1" (torch 2.1: mean keeps its input), "cuda-2.0" (torch 2.0: as 2.1, the OOM message in its pre-2.1 words), "cuda-1.10" (torch 1.10: softmax and log_softmax keep their input too, pytorch#64000; the pre-2.1 OOM message), "cpu-1.13" (what shared/oracle measured) ` +
			`or "cpu" (PyTorch 2.x on the CPU, where tools/oracle's differential-test vectors are measured)`, set: setRuntime},
	{Name: "parallel", Def: starlark.None, Doc: "parallel(...): the distributed layout (data, tensor, pipeline, context and expert parallelism, ZeRO, FSDP)",
		set: setParallel},
	{Name: "offload", Def: starlark.None, Doc: "offload(...): optimizer state, parameters or activations in host memory or on NVMe",
		set: setOffload},
	{Name: "cluster", Def: starlark.None, Doc: "cluster(...): the nodes and links the layout runs on", set: setCluster},
	{Name: "freeze", Def: starlark.None, Doc: `modules to freeze, by path prefix, role or "all" (a name no parameter of the model has is refused)`, set: setFreeze},
	{Name: "trainable", Def: starlark.None, Doc: `the only parameters that train: regular expressions (RE2) matched against each parameter's full name from its start, as Python's re.match does (Axolotl's unfrozen_parameters): trainable=["model.language_model", "lm_head"] freezes a vision tower; every other parameter is frozen (no gradient, no optimizer state, and a linear with a frozen weight keeps no input). Not with lora=; patterns that leave nothing to train are an error`,
		set: setTrainable},
	{Name: "loss_chunks", Def: starlark.MakeInt(1), Doc: "runs lm_head and cross-entropy in n chunks (torchtune's num_output_chunks) along the sequence, as torch.chunk cuts it: ceil(seq/n) tokens each, the last shorter, fewer than n chunks when they run out (seq=3 in 4 chunks: 3 of one token); " +
		`or "liger": Liger-Kernel's fused linear cross-entropy (use_liger_kernel=True, apply_liger_kernel_to_llama), which never makes the logits: the kernel runs the head over chunks of next_power_of_2(ceil(tokens / ceil(vocab/hidden))) tokens and computes the head input's and weight's gradients in the forward, saved until the backward hands them on ` +
		`(two chunks of logits live at once; from Liger 0.6.2 a 16-bit weight's gradient is added through a vocab x hidden product and its fp32 copy per chunk). "liger" is release 0.8.1 and later; "liger-0.6.2", "liger-0.5.3" and "liger-0.4.0" the releases from that one up to the next (docs/liger.md); ` +
		`or ("torchtitan", n): torchtitan's ChunkedLossWrapper with num_chunks n (batch x seq must divide by n), which runs each chunk's head, cross-entropy and backward inside the forward: one chunk's logits and fp32 loss tensors at a time, an fp32 [tokens, hidden] gradient buffer through the loop, its bf16 copy held to the decoder's backward, lm_head's gradient made in the forward; under tp (with parallel(loss_parallel="torch"), as torchtitan runs it) on the gathered tokens and this rank's vocabulary shard; under pp on the last stage (docs/liger.md); ` +
		`or "cce": Apple's Cut Cross-Entropy as Axolotl's CutCrossEntropyPlugin runs it (the kernels of its ml-cross-entropy fork at 5f0c7a7), which makes no logits at all: the forward saves each target's log-sum-exp (fp32) and the vocabulary's mean logits, the backward recomputes the logits block by block and makes the head input's and weight's gradients; 16-bit weights only (docs/liger.md); ` +
		`or "trl": TRL's fused LM head as its SFTTrainer runs it (TRL 1.15 and later): no logits; the scored positions' hidden states copied, their log-probabilities, entropy and argmax hits from tiles of 4,096 tokens by 32,768 vocabulary entries with fp32 statistics per token, fp32 gradient buffers in the backward (docs/liger.md, docs/dpo.md)`,
		set: setLossChunks},
	{Name: "liger_kernels", Def: starlark.False,
		Doc: "Liger-Kernel's RMSNorm and SwiGLU kernels in place of the eager layers (what use_liger_kernel=True and apply_liger_kernel_to_llama patch in besides the loss, which is loss_chunks=\"liger\"): " +
			"an RMSNorm saves its input and one fp32 per row and writes its input's gradient into its output's; a SwiGLU MLP's SiLU-and-multiply saves the gate and up outputs and writes their gradients into them (docs/liger.md)",
		set: setBool(func(p *core.Plan) *bool { return &p.LigerKernels })},
	{Name: "preference", Def: starlark.None,
		Doc: "dpo(...): TRL's DPOTrainer in place of the language model's cross-entropy: batch= counts pairs (2 x batch rows), a reference forward under no_grad after the policy's (docs/dpo.md); " +
			"kto(...): TRL's KTOTrainer: batch= counts unpaired rows, KL forwards under no_grad over mismatched pairs, a reference forward (docs/kto.md); " +
			"grpo(...): TRL's GRPOTrainer's training step: batch= counts completions, the fused LM head over their last completion= tokens, a colocated vLLM engine's memory beside the step (docs/grpo.md)",
		set: setPreference},
	{Name: "keep_logits", Def: starlark.False,
		Doc: "the training loop holds the model's output, and so its logits, through the backward: out = model(**batch); out.loss.backward(); " +
			"del out keeps out.logits (batch x seq x vocab in the compute dtype) until the backward ends, and they are freed before the optimizer step (True). " +
			"\"next\": a loop that rebinds out only when the next micro-batch's forward returns (out = model(**batch) at the top of the loop, OpenRLHF's SFT loop) " +
			"holds them through the optimizer step too, and the micro-batch before's through this forward until it returns (on data parallelism alone). " +
			"The Hugging Face Trainer does not keep them (compute_loss returns the loss alone, the output is dropped before the backward): False. " +
			"Not with loss_chunks",
		set: setKeepLogits},
	{Name: "use_cache", Def: starlark.False,
		Doc: "the model's forward builds transformers' DynamicCache (use_cache=True: the config's default, which a plain training loop leaves on; " +
			"the Hugging Face Trainer of transformers 5 turns it off through TrainingArguments.use_cache, False by default, and gradient checkpointing forces it off, " +
			"so it is ignored with checkpoint=): every attention layer copies k and v into the cache (torch.cat) and the kernel reads the copies, " +
			"which the output holds to the end of the forward, or through the backward with keep_logits=True. Where the kernel takes k and v as they are " +
			"(SDPA with enable_gqa, flash) the copies are what it saves; where it reads repeat_kv's expansion (eager, SDPA given a mask) they are kept besides (docs/models.md)",
		set: setBool(func(p *core.Plan) *bool { return &p.UseCache })},
	{Name: "attention_mask", Def: starlark.True,
		Doc: "the batch carries an attention_mask, as the Hugging Face Trainer's collators pass it (DataCollatorWithPadding, DataCollatorForLanguageModeling: ones where nothing is padded); " +
			"False: the model is called without one (model(input_ids, labels=...), as scripts of unpadded rows do). " +
			"It changes what transformers' masking_utils (4.53 and later) makes for SDPA: a sliding-window layer's boolean mask, which the forward holds until its layers are done (and checkpointed layers until their backward), is [batch, 1, seq, seq] with an attention_mask and one [1, 1, seq, seq] expanded over the batch without (batch times smaller: 64 MiB against 512 MiB at batch 8 and 8,192 tokens). " +
			"Under transformers 4.54 to 4.57 with the cache off (use_cache=False, or checkpointing), no attention_mask makes every causal SDPA layer get a [batch, 1, seq, seq] bool mask and repeat_kv's copies of k and v (the packed-sequence check of their masking_utils, on torch 2.6 and later; 5.0 and later, and any release given an attention_mask, pass none). " +
			"The rest is the same either way: with no padding full-attention SDPA layers get no mask (is_causal), SDPA's additive bias and eager attention's float mask are whole, chunked (Llama 4) and image masks read the sample, flash gets no 4-D mask (docs/models.md)",
		set: setNoAttentionMask},
	{Name: "dataloader_mask", Def: starlark.None,
		Doc: "precision=\"megatron\" only: whether Megatron-LM's dataloader makes each sample's causal attention_mask (create_attention_mask_in_dataloader, on unless --no-create-attention-mask-in-dataloader), " +
			"a [batch, 1, seq, seq] bool that get_batch loads onto every tensor-parallel rank of the first and last pipeline stages with each micro-batch (a context-parallel rank keeps its seq / cp query rows) " +
			"and forward_step drops when it returns: 64 MiB a micro-batch at 8,192 tokens, 1 GiB at 32,768. None: Megatron's default, on unless the rows are packed (tokens_per_batch: cu_seqlens and no mask). " +
			"Megatron plans load position_ids ([batch, seq] int64, first stage) and loss_mask ([batch, seq] fp32, kept by loss_func's product for its backward, last stage) either way",
		set: setDataloaderMask},
	{Name: "tokens_per_batch", Def: starlark.None, Doc: "packs sequences into one row of N tokens, as DataCollatorWithFlattening and TRL's padding_free do (position_ids restarting per document, no attention_mask): flash's varlen kernel; SDPA and eager on hf_config models of transformers 4.54 and later, whose masking_utils gives them one [1, 1, N, N] block-diagonal mask (docs/models.md)",
		set: setOptionalInt(func(p *core.Plan) *int64 { return &p.TokensPerBatch })},
	{Name: "doc_tokens", Def: starlark.None,
		Doc: "the packed documents' mean length in tokens, attention masked per document (torchtitan's block_causal under attn=\"flex\", flash-attn's varlen kernel under \"flash\"): " +
			"the attention core is priced per document, flex at its 128 x 128 blocks (a block touching a document boundary runs whole), flash per token, for documents of that length at a random offset; " +
			"a list of lengths gives the packed row's documents one by one, in order (tokens_per_batch defaults to their sum, and must equal it): flash is priced at exactly the sum of l (l + 1) / 2 scores, flex at the blocks they touch; " +
			"SDPA's and eager's block-diagonal mask (tokens_per_batch) computes every score of the row whatever the lengths. " +
			"None prices one causal row of seq (or tokens_per_batch) tokens, the upper bound. No dataset's figure is built in: torchtitan's default C4 has no published mean in Llama 3 tokens",
		set: setDocTokens},
	{Name: "host_memory", Def: starlark.None, Doc: "the host RAM of one node: the plan fails when the host memory its GPUs need (offload, save_on_cpu, paged state) is more; unset, r.notes says the need, unchecked",
		set: setOptionalInt(func(p *core.Plan) *int64 { return &p.HostMemory })},
	{Name: "quant_experts", Def: starlark.False, Doc: "stores an MoE's 3-D expert weights in quant's 4-bit nf4 too, dequantized whole under no_grad each time the experts' forward reads them and cached until it ends, as Axolotl's quantize_moe_experts (bitsandbytes' replace_parameter_4bit) does: " +
		"grouped_mm keeps each dequantized weight for its input's gradient, so every MoE layer's experts are saved in 16 bit for the backward (one layer's at a time under checkpointing); LoRA on the experts merges into the dequantized weight (PEFT's ParamWrapper); transformers' grouped_mm experts and Llama 4's dense bmm only, no expert parallelism (docs/peft.md)",
		set: setBool(func(p *core.Plan) *bool { return &p.QuantExperts })},
	{Name: "quant_lm_head", Def: starlark.False, Doc: "quantizes lm_head too (Lightning's BitsandbytesPrecision)",
		set: setBool(func(p *core.Plan) *bool { return &p.QuantLMHead })},
	{Name: "quant_from", Def: starlark.None, Doc: "the dtype the weights were quantized from (what dequantization returns)", set: setQuantFrom},
	{Name: "quant_storage", Def: starlark.None,
		Doc: "bitsandbytes' bnb_4bit_quant_storage: the float dtype the 4-bit codes are stored in, so that FSDP (fsdp=1, the model's dtype) and ZeRO-3 can shard them; the quantization statistics stay whole on every rank (None: uint8, not shardable)",
		set: setQuantStorage},
	{Name: "peft_kbit", Def: starlark.False,
		Doc: "PEFT's prepare_model_for_kbit_training, as QLoRA scripts (and TRL's SFTTrainer until late 2025) call it on a bitsandbytes model: every parameter that is not quantized (embeddings, norms, lm_head, biases, and the LoRA adapters PEFT adds) in fp32, with fp32 gradients and optimizer state; " +
			"the embedding's output made to require grad (enable_input_require_grads); full reentrant checkpointing when the plan sets none (its use_gradient_checkpointing=True, use_reentrant left to torch's True). " +
			"The 4-bit matmuls still compute in the plan's compute dtype, so without autocast the activations between them are fp32 (docs/peft.md)",
		set: setBool(func(p *core.Plan) *bool { return &p.KbitPrep })},
	{Name: "expandable_segments", Def: starlark.False,
		Doc: "replays the step with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (pages mapped into one growing segment per pool; free pages unmapped when the card is full)",
		set: setBool(func(p *core.Plan) *bool { return &p.ExpandableSegments })},
	{Name: "validation", Def: starlark.False,
		Doc: `replays a validation forward (eval mode, no gradients, eval chunk counts: Lightning's sanity check before the first step) through the same allocator before the step; it counts in the peaks and the OOM (phase "validation")`,
		set: setBool(func(p *core.Plan) *bool { return &p.Validation })},
	{Name: "rollout", Def: starlark.MakeInt(1),
		Doc: "anemoi's rollout loop for a graph model built from a data batch: n prediction steps, each input built from the last prediction, every step's graph kept until the backward",
		set: setRollout},
	{Name: "dispatch", Def: starlark.None,
		Doc: `how the step's kernels are launched, for the time model: "eager" (each PyTorch op its own kernel, launched from Python), ` +
			`"fused" (hand-fused kernels, as Megatron-LM with Transformer Engine or Liger run: each chain of elementwise ops one kernel, ` +
			`the vendor's fused attention), "compiled" (torch.compile: Inductor fuses elementwise chains), "cuda_graphs" (compiled and ` +
			`replayed as CUDA graphs: no CPU cost per kernel); None is "fused" for precision "megatron" and "eager" otherwise`,
		set: setDispatch},
	{Name: "step_overhead", Def: starlark.Float(0),
		Doc: "seconds each step spends outside the GPU's work (the data loader, the Python training loop, logging); " +
			"added to the step time as its own term, step_overhead",
		set: setStepOverhead},
	{Name: "images", Def: starlark.None,
		Doc: "images=(count, height, width): the images each sample of a vision-language model carries, in pixels after the processor's resize; " +
			"the vision tower turns each into patches and image tokens that take their place in the seq tokens (Qwen2.5-VL's dynamic resolution: " +
			"a 448x448 image is 256 tokens; Qwen3-VL's patches are 16 pixels: a 512x512 image is 256 tokens; Gemma 4's processor takes the images at this size " +
			"and resizes them itself to at most 280 soft tokens, padding every image to 2,520 patches: a 448x448 image is 256 tokens; LLaVA-NeXT and LLaVA-OneVision tile each image " +
			"at its best image_grid_pinpoints resolution and keep the tiles' patches its aspect ratio covers, a newline a row: llava-v1.6 at 480x640 is 2,340 tokens, at 640x480 2,352); Llama 3.2 Vision's images are its max_num_tiles tiles whatever their size, read by cross-attention, not joining the seq tokens",
		set: setImages},
	{Name: "videos", Def: starlark.None,
		Doc: "videos=(count, frames, height, width) or (count, frames, height, width, fps): the videos each sample of Qwen2.5-VL, Qwen3-VL, Qwen3.5, LLaVA-OneVision, GLM-4.1V, GLM-4.5V or SmolVLM2 carries: " +
			"the frames sampled from each (the video processor samples fps a second, 2 by default: a 10 s clip is 20 frames), in pixels after its resize; " +
			"the processor pads the frames to a multiple of temporal_patch_size (2) and the tower runs each pair as it runs an image, " +
			"its tokens taking their place in the seq tokens (Qwen2.5-VL: 16 frames of 448x448 are 8 x 256 = 2,048 tokens); Qwen3-VL's and Qwen3.5's processor " +
			"writes a timestamp (\"<1.2 seconds>\") and vision_start and vision_end around each pair, counted with them; LLaVA-OneVision's resizes every frame to image_size, " +
			"runs each through the tower and pools its patches 2 x 2 (27 x 27 patches to 14 x 14: 196 tokens a frame, one newline a video); with images= the tower runs on the images, then on the videos; " +
			"SmolVLM2's resizes every frame to one tile of image_size pixels whatever the video's size (fps 1 and at most 64 frames on the hub's processors) and writes it as an unsplit image, " +
			"tile tokens and 3 tags a frame (SmolVLM2-256M and 500M: 67), counted with seq; its intro and timestamps' text counts with the sample's text; not with images= in the same step",
		set: setVideos},
	{Name: "clip_grad_norm", Def: starlark.None,
		Doc: "the max norm of torch.nn.utils.clip_grad_norm_ before each optimizer step (the Hugging Face Trainer's max_grad_norm, 1.0 by default there; torchtitan's max_norm), " +
			"for the time model: a norm per gradient and a multiply of every gradient, launched per parameter by the \"for-loop\" optimizer (PyTorch before 2.0) and per chunk of tensors otherwise; None clips nothing",
		set: setClipGradNorm},
	{Name: "train_metrics", Def: starlark.MakeInt(0),
		Doc: "the cross-entropy metrics the training loop computes on each micro-batch's logits after its backward, for the time model: " +
			"each a torch cross_entropy over the logits under no_grad (under autocast in fp32: a cast, then log_softmax's three reads and a write), " +
			"as Composer's trainer updates a model's train metrics on every micro-batch (llm-foundry's MPT: LanguageCrossEntropy and LanguagePerplexity, 2); " +
			"0 computes none. Their transient fp32 copies are not replayed; a loss that leaves no rank whole logits (vocabulary-parallel, chunked, linear-fused) prices none and r.notes says so",
		set: setTrainMetrics},
	{Name: "first_step", Def: starlark.False,
		Doc: "replays the first training step, before the first optimizer.step() makes the optimizer's state (Adam's moments), and reports its figures; the default is the steady state (step 2 onwards), whose peak_reserved and device_used on one GPU, under Megatron's layouts and under FSDP2 are the most reserved over that first step and the steady one (the steady step runs in the cache the first left)",
		set: setBool(func(p *core.Plan) *bool { return &p.FirstStep })},
	{Name: "empty_cache", Def: starlark.False,
		Doc: "torch.cuda.empty_cache() at the start of every step (after zero_grad), the peaks reset there: the steady step starts from the segments that hold what persists (parameters, optimizer state), not the cache the first step left; on one GPU and under Megatron's layouts, where the first step is replayed (elsewhere the steady step is replayed alone from an empty cache either way)",
		set: setBool(func(p *core.Plan) *bool { return &p.EmptyCache })},
	{Name: "zero_grad", Def: starlark.String("none"),
		Doc: `how optimizer.zero_grad() clears the gradients between steps: "none" (set_to_none=True, PyTorch's default since 2.0: freed after the step, made again by the next backward) ` +
			`or "zeros" (set_to_none=False, the default before PyTorch 2.0, which the Hugging Face Trainer of 2022-23 called: zeroed in place, allocated through the next forward)`,
		set: setZeroGrad},
	{Name: "nccl_buffsize", Def: starlark.None,
		Doc: "NCCL_BUFFSIZE in bytes: the Simple protocol's buffer of each NCCL connection (None: NCCL's default, 4 MiB); NCCL's memory per communicator grows with it (r.overheads)",
		set: setOptionalInt(func(p *core.Plan) *int64 { return &p.RuntimeMemory.NCCLBuffSize })},
	{Name: "nccl_nchannels_per_net_peer", Def: starlark.None,
		Doc: "NCCL_NCHANNELS_PER_NET_PEER: the send/recv channels NCCL gives each peer once a communicator spans nodes, its peers in the node too (None: NCCL's automatic 2, or 1 when 2 x ranks is above 4 x the p2p channels); an all-to-all's or a pipeline's buffers in the node grow with it",
		set: setOptionalInt(func(p *core.Plan) *int64 { return &p.RuntimeMemory.NCCLNChannelsPerNetPeer })},
	{Name: "nccl_nvls", Def: starlark.String("auto"),
		Doc: `NCCL_NVLS_ENABLE: "auto" (NVLink SHARP on NVSwitch nodes of Hopper and later, for communicators of more than two ranks in a node), "on" or "off"; NVLS binds about 288 MiB per rank of the node on every GPU (2.25 GiB on 8 GPUs)`,
		set: setString(func(p *core.Plan) *string { return &p.RuntimeMemory.NCCLNVLS })},
	{Name: "nccl_connect", Def: starlark.String("lazy"),
		Doc: `when NCCL connects a communicator's algorithms: "lazy" (NCCL_RUNTIME_CONNECT=1, the default since NCCL 2.22: rings always, trees and NVLS only for the all-reduces that use them) or "eager" (earlier NCCL: rings, trees, NVLS and the send/recv pool for network peers when the communicator is made)`,
		set: setString(func(p *core.Plan) *string { return &p.RuntimeMemory.NCCLConnect })},
	{Name: "cuda_module_loading", Def: starlark.String("lazy"),
		Doc: `CUDA_MODULE_LOADING: "lazy" (the default since CUDA 11.7 and PyTorch 1.13: kernels load when first launched) or "eager" (every kernel at start: the card's measured eager context where the catalog has one, the V100's 1,343 MiB or with runtime "cuda" the H200's 1,796.8 MiB, which the H100s take too, else about 362 MiB more)`,
		set: setString(func(p *core.Plan) *string { return &p.RuntimeMemory.ModuleLoading })},
	{Name: "nccl_avoid_record_streams", Def: starlark.False,
		Doc: `TORCH_NCCL_AVOID_RECORD_STREAMS=1: ProcessGroupNCCL stashes a collective's tensors instead of calling record_stream on them. With runtime "cuda-2.6" or older (which record by default) Megatron's MoE all-to-all blocks are otherwise held after their free until the host next waits for the device (the dispatcher's sync in each MoE layer, the optimizer step), so the cache grows (docs/device-memory.md, "Streams"); newer runtimes stash either way`,
		set: setBool(func(p *core.Plan) *bool { return &p.RuntimeMemory.NCCLAvoidRecordStreams })},
	{Name: "cublas_workspace_config", Def: starlark.None,
		Doc: `CUBLAS_WORKSPACE_CONFIG, ":SIZE:COUNT" pairs with SIZE in KiB (":4096:8" is 32 MiB): the size of each cuBLAS workspace PyTorch allocates through its caching allocator, one per thread that runs matmuls (a training step has two: the forward's and the autograd engine's backward thread). None: PyTorch's default, 8 MiB + 128 KiB, 32 MiB on Hopper and Blackwell, 128 MiB on the MI300 series`,
		set: setOptionalString(func(p *core.Plan) *string { return &p.RuntimeMemory.CublasWorkspaceConfig })},
}

// keywordIndex finds a keyword's position in trainKeywords.
var keywordIndex = func() map[string]int {
	m := make(map[string]int, len(TrainKeywords))
	for i, k := range TrainKeywords {
		m[k.Name] = i
	}
	return m
}()

// trainArgNames are the keywords' names in signature order.
func TrainArgNames() []string {
	names := make([]string, len(TrainKeywords))
	for i, k := range TrainKeywords {
		names[i] = k.Name
	}
	return names
}

// trainSig is train()'s signature.
func TrainSig() string {
	parts := []string{"model"}
	for _, k := range TrainKeywords[1:] {
		d := k.Sig
		if d == "" {
			d = k.Def.String()
		}
		parts = append(parts, k.Name+"="+d)
	}
	return "train(" + strings.Join(parts, ", ") + ")"
}

// trainDoc is train()'s documentation: a summary, then each keyword.
func TrainDoc() string {
	var b strings.Builder
	b.WriteString("A training step to simulate: simulate(train(m, batch=8, seq=2048, precision=\"bf16-mixed\")). " +
		"A trainer's own names (per_device_train_batch_size, max_seq_length, gradient_accumulation_steps, bf16=True, " +
		"load_in_4bit, deepspeed) are refused with the keyword memsh uses for them; memsh check reads a trainer's config as it is.\n\n")
	b.WriteString("Keywords:\n")
	for _, k := range TrainKeywords {
		fmt.Fprintf(&b, "- %s: %s.\n", k.Name, k.Doc)
	}
	b.WriteString("\nAttributes: every argument by name. plan.replace(**changes) returns a variant, the natural way to sweep.")
	return b.String()
}

// trainArgs holds train()'s arguments, resolved to canonical values
// (ints, a GPU, a Precision, ...) so that replace() can re-run them.
type trainArgs struct {
	vals []starlark.Value // by position in trainKeywords
}

func DefaultTrainArgs() trainArgs {
	a := trainArgs{vals: make([]starlark.Value, len(TrainKeywords))}
	for i, k := range TrainKeywords {
		a.vals[i] = k.Def
	}
	return a
}

// clone copies the values, so a variant does not write into its origin.
func (a trainArgs) Clone() trainArgs {
	return trainArgs{vals: append([]starlark.Value(nil), a.vals...)}
}

// get is the value of the keyword name.
func (a *trainArgs) Get(name string) starlark.Value { return a.vals[keywordIndex[name]] }

// set replaces the value of the keyword name.
func (a *trainArgs) Set(name string, v starlark.Value) { a.vals[keywordIndex[name]] = v }

// unpack overwrites the arguments given in args and kwargs; the model is
// required unless optional is set (replace).
func (a *trainArgs) unpack(fn string, args starlark.Tuple, kwargs []starlark.Tuple, optional bool) error {
	if err := misplacedKeyword(fn, kwargs); err != nil {
		return err
	}
	if err := AliasedKeyword(fn, kwargs, TrainAlias); err != nil {
		return err
	}
	pairs := make([]any, 0, 2*len(TrainKeywords))
	for i, k := range TrainKeywords {
		name := k.Name
		if i > 0 || optional {
			name += "?"
		}
		pairs = append(pairs, name, &a.vals[i])
	}
	return starlark.UnpackArgs(fn, args, kwargs, pairs...)
}

// misplacedKeyword is the error for a keyword train() (or replace()) does
// not take that parallel() does (train(zero=3)): the layout is one value,
// parallel=parallel(...), and the hint says so. Other unknown keywords are
// left to UnpackArgs, whose error has its own did-you-mean.
func misplacedKeyword(fn string, kwargs []starlark.Tuple) error {
	for _, kv := range kwargs {
		name, _ := starlark.AsString(kv[0])
		if _, ok := keywordIndex[name]; ok || !slices.Contains(LayoutKeywordNames(), name) {
			continue
		}
		return &units.Error{Msg: fmt.Sprintf("%s: unexpected keyword argument %q", fn, name),
			Hint: fmt.Sprintf("%s is a parallel() keyword: pass parallel=parallel(%s=%s, ...)", name, name, kv[1].String())}
	}
	return nil
}

// resolve sets every keyword into a new plan, in table order.
func (a *trainArgs) resolve() (*core.Plan, error) {
	p := &core.Plan{}
	for i, k := range TrainKeywords {
		if err := k.set(k.Name, &a.vals[i], a, p); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Setters shared by keywords of one type.

func setInt(dst func(*core.Plan) *int64) func(string, *starlark.Value, *trainArgs, *core.Plan) error {
	return func(name string, v *starlark.Value, a *trainArgs, p *core.Plan) error {
		n, err := host.AsInt64(*v, name)
		if err != nil {
			return err
		}
		*dst(p), *v = n, starlark.MakeInt64(n)
		return nil
	}
}

// setOptionalInt is setInt for keywords that may be None (left unset).
func setOptionalInt(dst func(*core.Plan) *int64) func(string, *starlark.Value, *trainArgs, *core.Plan) error {
	set := setInt(dst)
	return func(name string, v *starlark.Value, a *trainArgs, p *core.Plan) error {
		if *v == starlark.None {
			return nil
		}
		return set(name, v, a, p)
	}
}

// setDocTokens takes the documents' mean length, or their lengths one by
// one (a list: Plan.Docs, packed into one row of their sum).
func setDocTokens(name string, v *starlark.Value, a *trainArgs, p *core.Plan) error {
	p.Docs = nil
	switch x := (*v).(type) {
	case starlark.NoneType:
		p.DocTokens = 0
		return nil
	case *starlark.List, starlark.Tuple:
		it := x.(starlark.Iterable).Iterate()
		defer it.Done()
		var sum int64
		var e starlark.Value
		for it.Next(&e) {
			n, err := host.AsInt64(e, name+" element")
			if err != nil {
				return err
			}
			if n <= 0 {
				return fmt.Errorf("%s: every document's length must be positive (got %d)", name, n)
			}
			p.Docs = append(p.Docs, n)
			sum += n
		}
		if len(p.Docs) == 0 {
			return fmt.Errorf("%s: an empty list of documents (None for one causal row)", name)
		}
		p.DocTokens = (sum + int64(len(p.Docs))/2) / int64(len(p.Docs))
		if p.TokensPerBatch == 0 {
			p.TokensPerBatch = sum
		}
		return nil
	}
	return setInt(func(p *core.Plan) *int64 { return &p.DocTokens })(name, v, a, p)
}

// setLossChunks takes a number of chunks (torchtune), "cce" (Cut
// Cross-Entropy, core.CCELoss) or the name of a Liger-Kernel fused linear
// cross-entropy (core.LigerVersions).
func setLossChunks(name string, v *starlark.Value, a *trainArgs, p *core.Plan) error {
	if t, ok := (*v).(starlark.Tuple); ok {
		return setTitanLoss(name, t, p)
	}
	if s, ok := (*v).(starlark.String); ok {
		if _, ok := core.LookupLiger(string(s)); !ok && string(s) != core.CCELoss && string(s) != core.TRLHead {
			return fmt.Errorf("%s: unknown %q (a number of chunks, %q for Cut Cross-Entropy, %q for TRL's fused LM head, or Liger's fused linear cross-entropy: %s)", name, string(s), core.CCELoss, core.TRLHead, core.LigerNames())
		}
		p.FusedLoss, p.LossChunks = string(s), 1
		return nil
	}
	return setOptionalInt(func(p *core.Plan) *int64 { return &p.LossChunks })(name, v, a, p)
}

// setTitanLoss takes ("torchtitan", n): torchtitan's ChunkedLossWrapper
// with num_chunks n. A recipe and its count, where the int form is a count
// alone (torchtune's) and the string form a kernel choosing its own chunks.
func setTitanLoss(name string, t starlark.Tuple, p *core.Plan) error {
	hint := fmt.Sprintf(`(%q, n): torchtitan's ChunkedLossWrapper with num_chunks n (its default 8)`, core.TitanLoss)
	if len(t) != 2 {
		return fmt.Errorf("%s: a tuple is %s (got %s, a tuple of %d)", name, hint, t.String(), len(t))
	}
	if s, ok := t[0].(starlark.String); !ok || string(s) != core.TitanLoss {
		return fmt.Errorf("%s: a tuple is %s (got %s first)", name, hint, t[0].String())
	}
	k := int64(0)
	if n, ok := t[1].(starlark.Int); ok {
		k, _ = n.Int64()
	}
	if k < 1 {
		return fmt.Errorf("%s: a tuple is %s, n a positive number (got %s)", name, hint, t[1].String())
	}
	p.FusedLoss, p.LossChunks = core.TitanLoss, k
	return nil
}

// setOptionalString is setString for keywords that may be None (left unset).
func setOptionalString(dst func(*core.Plan) *string) func(string, *starlark.Value, *trainArgs, *core.Plan) error {
	set := setString(dst)
	return func(name string, v *starlark.Value, a *trainArgs, p *core.Plan) error {
		if *v == starlark.None {
			return nil
		}
		return set(name, v, a, p)
	}
}

func setString(dst func(*core.Plan) *string) func(string, *starlark.Value, *trainArgs, *core.Plan) error {
	return func(name string, v *starlark.Value, a *trainArgs, p *core.Plan) error {
		s, ok := (*v).(starlark.String)
		if !ok {
			return fmt.Errorf("%s must be a string (got %s)", name, (*v).Type())
		}
		*dst(p) = string(s)
		return nil
	}
}

func setBool(dst func(*core.Plan) *bool) func(string, *starlark.Value, *trainArgs, *core.Plan) error {
	return func(name string, v *starlark.Value, a *trainArgs, p *core.Plan) error {
		b, ok := (*v).(starlark.Bool)
		if !ok {
			return boolError(name, *v, false)
		}
		*dst(p) = bool(b)
		return nil
	}
}

// setNoAttentionMask resolves attention_mask=, stored inverted so that a
// plan built without it carries the collator's mask (Plan.NoAttentionMask).
func setNoAttentionMask(name string, v *starlark.Value, a *trainArgs, p *core.Plan) error {
	b, ok := (*v).(starlark.Bool)
	if !ok {
		return boolError(name, *v, false)
	}
	p.NoAttentionMask = !bool(b)
	return nil
}

// setDataloaderMask resolves dataloader_mask= (Plan.DataloaderMask): None
// leaves Megatron's default.
func setDataloaderMask(name string, v *starlark.Value, a *trainArgs, p *core.Plan) error {
	switch x := (*v).(type) {
	case starlark.NoneType:
		p.DataloaderMask = ""
	case starlark.Bool:
		p.DataloaderMask = core.DataloaderMaskOff
		if x {
			p.DataloaderMask = core.DataloaderMaskOn
		}
	default:
		return boolError(name, *v, true)
	}
	return nil
}

// boolError is a bool keyword given another type, with the values it
// takes as the hint (none: the keyword's default, where it takes None).
func boolError(name string, v starlark.Value, none bool) error {
	hint := name + "=True or " + name + "=False"
	if none {
		hint += " (None: the default)"
	}
	return &units.Error{Msg: fmt.Sprintf("%s must be True or False (got %s)", name, v.Type()), Hint: hint}
}
