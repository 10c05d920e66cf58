package importers

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/sim/hf"
)

// Megatron-SWIFT: ms-swift's `megatron sft` and `megatron pt`
// (swift/cli/_megatron/main.py at v4.5.2), its arguments read as
// MegatronArguments reads them (swift/megatron/arguments/megatron_args.py,
// megatron_base_args.py, sft_args.py at v4.5.2, ff5128777). ms-swift hands
// them to Megatron-LM (initialize_megatron), so they are derived as the
// Megatron-LM flags the Megatron reader reads (megatron.go: its
// recompute, precision, loss and layout), under ms-swift's defaults where
// they differ from Megatron-LM's:
//
//   - recompute_granularity selective (none: None), recompute_modules
//     core_attn;
//   - cross_entropy_loss_fusion True, attention_backend flash;
//   - use_distributed_optimizer True, overlap_grad_reduce and
//     overlap_param_gather False;
//   - micro_batch_size 1, global_batch_size 16;
//   - sequence_parallel dropped at tp 1 (MegatronArguments.__post_init__);
//   - bf16 or fp16 from torch_dtype (ModelArguments._init_mixed_precision:
//     float16 and float32 fp16, bfloat16 bf16), the model config.json's
//     dtype unless --torch_dtype; main_grads_dtype fp32 (_map_dtype:
//     accumulate_allreduce_grads_in_fp32), bf16 Megatron's
//     --grad-reduce-in-bf16;
//   - the sequence: seq_length = packing_length or max_length
//     (MegatronBaseArguments.__post_init__), padding_free True, so
//     packed or padding-free rows with cu_seqlens and no attention mask;
//   - MoE: moe_grouped_gemm True (TEGroupedMLP: hf_config(experts=
//     "megatron")), moe_router_dtype fp32, moe_token_dispatcher_type
//     alltoall, expert_tensor_parallel_size 1 (not tp's, as Megatron-LM
//     would default it), moe_shared_expert_overlap and
//     moe_permute_fusion False (parallel(permute_fusion=False)).
//
// The model is mcore-bridge's, built from the --model's config.json
// (get_model_info_meta), written as hf_config of that config.json under
// transformers 4.57.1 (Megatron builds its own modules; the calibration
// rows read configs so: sim/calib_swift_moe_sources_test.go).
func megatronSwiftPlan(t *tree, o Options, sub string) (*plan, error) {
	if sub != "sft" && sub != "pt" {
		return nil, t.errorf(swiftCommandKey, "memsh check reads `megatron sft` and `megatron pt`; write the plan in Starlark (docs/check.md)",
			"Megatron-SWIFT's `megatron %s` is not read", sub)
	}
	o, _, err := swiftWorld(t, o, true)
	if err != nil {
		return nil, err
	}
	if err := megatronSwiftRefused(t); err != nil {
		return nil, err
	}
	p := &plan{}
	moe, layers, err := megatronSwiftModel(t, o, p)
	if err != nil {
		return nil, err
	}
	if err := megatronSwiftLayout(t, layers); err != nil {
		return nil, err
	}
	micro, err := t.integer("micro_batch_size", 1, 1, 1<<24)
	if err != nil {
		return nil, err
	}
	p.set("batch", num(micro))
	if err := megatronSwiftSeq(t, o, p); err != nil {
		return nil, err
	}
	if err := megatronSwiftPrecision(t, o); err != nil {
		return nil, err
	}
	megatron, err := megatronPrecision(t, p)
	if err != nil {
		return nil, err
	}
	p.set("optimizer", str("adamw")) // adam, the one read (megatronSwiftRefused): FusedAdam with adam_w_mode
	if err := megatronClip(t, p, "clip_grad"); err != nil {
		return nil, err
	}
	if err := megatronSwiftRecompute(t, p); err != nil {
		return nil, err
	}
	p.set("gpu", str(o.GPU))
	extra, err := megatronSwiftMoE(t, moe)
	if err != nil {
		return nil, err
	}
	tp, err := t.integer("tensor-model-parallel-size", 1, 1, 1<<20)
	if err != nil {
		return nil, err
	}
	if err := megatronLayout(t, o, p, tp, micro, megatron, extra...); err != nil {
		return nil, err
	}
	if strings.Contains(envOf(t, "PYTORCH_CUDA_ALLOC_CONF"), "expandable_segments:True") {
		p.set("expandable_segments", "True")
	}
	megatronSwiftNotes(t)
	return p, nil
}

// megatronSwiftModel writes the model from --model's config.json:
// hf_config under transformers 4.57.1 with Megatron's grouped experts
// when it has MoE blocks. It returns whether it has and its layers.
func megatronSwiftModel(t *tree, o Options, p *plan) (moe bool, layers int64, err error) {
	name, err := t.str("model", "")
	if err != nil {
		return false, 0, err
	}
	if name == "" {
		return false, 0, &Error{File: t.file, Key: "model", Msg: "missing: memsh reads the model from --model (a Hub id or a folder)",
			Hint: "--model Qwen/Qwen3-8B; a script that loads an mcore checkpoint (--mcore_model, 3.x's --load) still names its model by --model"}
	}
	if o.ModelData == nil {
		return false, 0, t.errorf("model", modelHint(o), "Megatron-SWIFT builds %s from its config.json, which memsh does not have", quoteKey(name))
	}
	if mt, err := parseJSON(o.Model, o.ModelData); err != nil {
		return false, 0, err
	} else if _, vl := mt.leaves["vision_config.model_type"]; vl || mt.hasUnder("vision_config") {
		return false, 0, t.errorf("model", "write the plan in Starlark (docs/check.md)", "Megatron-SWIFT's multimodal training (its frozen vision tower, freeze_vit) is not read")
	}
	attn, err := megatronSwiftAttention(t)
	if err != nil {
		return false, 0, err
	}
	m, err := hf.FromConfigOptions(o.ModelData, hf.Options{Attn: attn, Transformers: megatronSwiftTransformers})
	if err != nil {
		return false, 0, t.errorf("model", "memsh builds the model from its config.json as hf_config does", "%v", err)
	}
	moe = hf.HasMoE(m)
	args := []string{str(o.Model), kw("attn", str(attn)), kw("transformers", str(megatronSwiftTransformers))}
	if moe {
		args = append(args, kw("experts", str(hf.ExpertsMegatron)))
	}
	p.model = call("hf_config", args...)
	layers, err = megatronSwiftLayers(o)
	return moe, layers, err
}

// megatronSwiftTransformers is the transformers release whose modules
// memsh reads a Megatron run's config.json under (hf.ExpertsMegatron).
const megatronSwiftTransformers = "4.57.1"

// megatronSwiftAttention is --attention_backend (flash by default;
// flash_2, flash_3 and flash_4 force a flash-attn version, _init_attention_backend):
// Transformer Engine's flash and fused kernels keep no score matrix, as
// hf_config's "flash"; unfused and local do ("eager"); auto lets TE pick
// (flash or fused on these GPUs).
func megatronSwiftAttention(t *tree) (string, error) {
	// ms-swift 3.x's use_flash_attn (Megatron-LM's --use-flash-attn, its
	// attention_backend then auto): flash either way on these GPUs
	if _, err := t.boolean("use_flash_attn", false); err != nil {
		return "", err
	}
	b, err := t.str("attention_backend", "flash")
	if err != nil {
		return "", err
	}
	switch b {
	case "flash", "flash_2", "flash_3", "flash_4", "fused", "auto":
		return "flash", nil
	case "unfused", "local":
		return "eager", nil
	}
	return "", t.errorf("attention_backend", "flash, fused, unfused, local or auto (AttnBackend)", "unknown backend %s", quoteKey(b))
}

// megatronSwiftSeq is the sequence (seq_length = packing_length or
// max_length) and the batch's mask: padding_free (True by default; packing
// sets it) hands cu_seqlens and no [batch, 1, seq, seq] mask.
func megatronSwiftSeq(t *tree, o Options, p *plan) error {
	n, err := t.integer("max_length", 0, 1, 1<<24)
	if err != nil {
		return err
	}
	packing, err := t.boolean("packing", false)
	if err != nil {
		return err
	}
	if packing {
		if n, err = t.integer("packing_length", n, 1, 1<<24); err != nil {
			return err
		}
	}
	free, err := t.boolean("padding_free", true)
	if err != nil {
		return err
	}
	switch {
	case o.Seq > 0:
		n = o.Seq
	case n == 0:
		m, err := swiftMaxModelLen(o)
		if err != nil {
			return err
		}
		if m == 0 {
			return &Error{File: t.file, Key: "max_length", Msg: "missing: ms-swift then cuts rows at the model's max_model_len, read from its config.json",
				Hint: "give the script's --max_length 8192, or the tokens per row: --seq N"}
		}
		n = m
		t.notModelled = append(t.notModelled, fmt.Sprintf("max_length: unset, so ms-swift cuts rows at the model's max_model_len, %d (its config.json)", n))
	}
	p.set("seq", num(n))
	switch {
	case packing || free:
		p.set("dataloader_mask", boolean(false))
		if !packing && o.Seq == 0 {
			t.notModelled = append(t.notModelled, fmt.Sprintf("padding_free: each micro-batch's rows joined without padding, up to %d tokens a row: memsh replays rows of %d (--seq N for another length)", n, n))
		}
	default:
		t.notModelled = append(t.notModelled, fmt.Sprintf("padding_free false: rows padded to the batch's longest, at most %d tokens, with the attention mask ms-swift's collator makes, which memsh does not load", n))
		p.set("dataloader_mask", boolean(false))
	}
	return nil
}

// megatronSwiftPrecision derives Megatron's --bf16 / --fp16 from
// torch_dtype (ModelArguments._init_mixed_precision) unless --bf16 or
// --fp16 say, and --grad-reduce-in-bf16 from main_grads_dtype.
func megatronSwiftPrecision(t *tree, o Options) error {
	dtype, err := t.str("torch_dtype", "")
	if err != nil {
		return err
	}
	if dtype == "" {
		if dtype, err = swiftConfigDtype(t, o); err != nil {
			return err
		}
	}
	dtype = strings.TrimPrefix(dtype, "torch.")
	var bf16 bool
	switch dtype {
	case "bfloat16", "bf16", "":
		bf16 = true // else bf16 on a GPU that has it (get_default_torch_dtype)
	case "float16", "fp16", "float32", "fp32":
	default:
		return t.errorf("torch_dtype", "bfloat16, float16 or float32", "unknown dtype %s", quoteKey(dtype))
	}
	for _, k := range []string{"bf16", "fp16"} {
		v, err := t.boolean(k, (k == "bf16") == bf16)
		if err != nil {
			return err
		}
		t.derive(k, v, k)
	}
	grads, err := t.str("main_grads_dtype", "fp32")
	if err != nil {
		return err
	}
	switch grads {
	case "fp32":
		t.derive("grad-reduce-in-bf16", false, "main_grads_dtype")
	case "bf16":
		t.derive("grad-reduce-in-bf16", true, "main_grads_dtype")
	default:
		return t.errorf("main_grads_dtype", "fp32 or bf16", "unknown dtype %s", quoteKey(grads))
	}
	for _, k := range []string{"fp8_format", "fp8_recipe", "fp8_param_gather"} {
		if v, ok := t.get(k); ok {
			t.derive(strings.ReplaceAll(k, "_", "-"), v, k)
		}
	}
	hist, err := t.integer("fp8_amax_history_len", 1024, 1, 1<<20) // ms-swift's default; Megatron-LM's is 1
	if err != nil {
		return err
	}
	t.derive("fp8-amax-history-len", hist, "fp8_amax_history_len")
	return nil
}
