package hf

import (
	"fmt"
	"slices"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// DefaultTransformers is the transformers version the models are built
// for when none is given: the latest stable release PyPI serves, 5.25.0
// (uploaded 2026-12-01; `pip index versions transformers`), what a new
// user installs. Runs made with an older release pass transformers=: the
// calibration rows of published runs pin theirs. It was 4.57.1 (October
// 2025) until December 2026.
const DefaultTransformers = "5.25.0"

// tokenTypeGatherSince is the first transformers release whose RoBERTa
// and XLM-RoBERTa embeddings, handed no token_type_ids, gather the
// token_type_ids buffer at the [batch, seq] position ids
// (torch.gather(buffer.expand(batch, -1), 1, position_ids): a new [batch,
// seq] int64 the lookup saves) instead of viewing buffer[:, :seq]
// expanded (no new storage): the 5.0.0 and 5.25.0 wheels' RobertaEmbeddings
// and XLMRobertaEmbeddings.forward; the 4.57.1 wheel views.
var tokenTypeGatherSince = [2]int{5, 0}

// gqaSince is the first transformers release whose SDPA path passes
// enable_gqa=True instead of expanding k and v (use_gqa_in_sdpa in
// integrations/sdpa_attention.py: absent from the 4.53.3 wheel, present
// in 4.54.0; huggingface/transformers#39412).
var gqaSince = [2]int{4, 54}

// noCacheMaskBefore is the first transformers release after gqaSince
// whose forward without a cache or an attention_mask no longer hands SDPA
// a mask (find_packed_sequence_indices returns None when nothing is
// packed: the 5.0.0 wheel's masking_utils.py; the 4.54.0, 4.55.0,
// 4.56.0, 4.57.1 and 4.57.6 wheels return the tensor, the 4.53.0 wheel
// has no such check): nn.Attention.NoCacheMask from gqaSince on.
var noCacheMaskBefore = [2]int{5, 0}

// expertsSince is the first transformers release that stores the experts
// of its MoE blocks as 3-D parameters (gate_up_proj [experts, 2 *
// intermediate, hidden], down_proj [experts, hidden, intermediate]) with
// a TopKRouter parameter module named gate, and runs them through the
// experts_implementation interface: "grouped_mm" by default, "eager" the
// per-expert loop over the 3-D weights (@use_experts_implementation,
// integrations/moe.py and PreTrainedModel.get_correct_experts_implementation
// in the 5.0.0 and 5.17.0 wheels).
var expertsSince = [2]int{5, 0}

// sentinelsEPSince is the first transformers release whose MoE experts
// handle expert parallelism's sentinel rows only when the experts are
// sharded (grouped_mm_experts_forward's "if self._is_expert_parallel" in
// integrations/moe.py) and whose eager loops one_hot the routing into
// num_experts + 1 classes: the 5.18.0 wheel (5.17.0 masks on every rank,
// num_classes=self.num_experts), nn.MoE.SentinelsEP.
var sentinelsEPSince = [2]int{5, 18}

// keepGateSince is the first transformers release whose DeepSeek-V2,
// DeepSeek-V3 (and Kimi K2.5's text model), DeepSeek-V3.2, GLM-4.5,
// GLM-4.7-Flash and GLM-5 list "gate.weight" in _keep_in_fp32_modules_strict,
// so from_pretrained keeps their routers' weights fp32 in a bf16 model:
// the 5.24.0 wheel (5.23.0 lists "e_score_correction_bias" alone, and
// DeepSeek-V2 nothing). hfExperts.keepRouterSince.
var keepGateSince = [2]int{5, 24}

// upcastInLossSince is the first transformers release whose causal LMs
// leave the logits in the model's dtype and upcast them in the loss
// (ForCausalLMLoss in loss/loss_utils.py, the 4.46.0 wheel; in 4.45.2
// LlamaForCausalLM.forward runs logits = logits.float() itself, "TODO:
// remove the float() operation in v4.46"): core.Model.ForwardUpcast
// before it.
var upcastInLossSince = [2]int{4, 46}

// padLabelsSince is the first transformers release whose causal-LM loss
// shifts the labels (nn.functional.pad(labels, (0, 1)) in ForCausalLMLoss,
// the 4.49.0 wheel) rather than copying all but the last position of the
// logits (shift_logits = logits[..., :-1, :].contiguous() in the 4.40.0,
// 4.45.2, 4.46.0 and 4.48.0 wheels): core.Model.ShiftLogits before it.
var padLabelsSince = [2]int{4, 49}

// mambaLossSince and mamba2LossSince are the first releases whose Mamba
// and Mamba-2 causal LMs call loss_function (which pads the labels)
// rather than copying shift_logits themselves: the 5.17.0 wheel for
// modeling_mamba.py (5.0.0 to 5.16.0 still shift), 4.52.1 for
// modeling_mamba2.py (4.51.0 still shifts).
var (
	mambaLossSince  = [2]int{5, 17}
	mamba2LossSince = [2]int{4, 52}
)

// mambaSkipFP32Since is the first transformers release whose Mamba-1
// PyTorch path (MambaMixer without the mamba_ssm kernels) hands the scan
// D.float(): the skip u x D, its sum with the scan output and the gated
// product run in fp32 (mamba_selective_scan in models/mamba/modeling_mamba.py
// of the 5.15.0 wheel; 5.14.0's slow_forward multiplies by self.D in the
// activations' dtype), nn.Mamba.SkipFP32. Measured on the CPU:
// tools/oracle/mamba1.py, TestMambaSlowSavesAsTransformers.
var mambaSkipFP32Since = [2]int{5, 15}

// falconSharedSince is the first transformers release whose Falcon runs
// its attention through the shared interface (modeling_falcon.py of the
// 5.25.0 wheel; 5.24.0 keeps 4.x's FalconAttention, _split_heads and
// FalconFlashAttention2): q, k and v are views of the fused projection,
// eager_attention_forward copies k and v to every head (repeat_kv) and
// takes the softmax in fp32, and FalconModel always materializes the
// causal mask (create_causal_mask(..., allow_is_causal_skip=False)), so
// SDPA gets a mask and repeat_kv's copies too: nn.Attention.RepeatKV,
// SoftmaxFP32 and MaskAdd (setFalconShared). Measured on the CPU under
// 5.24.0 and 5.25.0: tools/oracle/hf_block_saved.py, TestFalconSharedPath.
var falconSharedSince = [2]int{5, 25}

// mropeOnceSince is the first transformers release checked whose
// Qwen2.5-VL recombines the multimodal rotary sections once a forward
// (Qwen2_5_VLRotaryEmbedding.recomposition_frequencies in the 5.17.0
// wheel); the 4.57.1 and 5.0.0 wheels' apply_multimodal_rotary_pos_emb
// cats them into a new pair in every layer (nn.Attention.RopeTablesEachLayer).
// Measured under 5.25.0: TestRopeTablesSavedAsTransformers.
var mropeOnceSince = [2]int{5, 17}

// kimiIndexAddMergeSince is the first transformers release whose Kimi
// K2.5 tower pools its merged patches with index_add_ (Kimi_K25VisionModel.temporal_merge
// in the 5.24.0 and 5.25.0 wheels: new_zeros in fp32, index_add_ of
// hidden_states.float() * frame_weight[:, None]); the 5.17.0, 5.19.0,
// 5.21.0 and 5.23.0 wheels gather hidden_states[merge_index] and take
// .mean(dim=1): nn.KimiVision.IndexAddMerge. Measured on the CPU under
// 5.25.0 and 5.17.0: tools/oracle/kimivis.py, TestKimiVisionSavesAsTransformers.
var kimiIndexAddMergeSince = [2]int{5, 24}

// lfm2VLGatherSince is the first transformers release whose LFM2-VL
// gathers every image's patch blocks into one grid for the projector and
// resizes SigLIP2's position grid by a weight matrix (get_image_features
// and resize_positional_embeddings in the 5.24.0 and 5.25.0 wheels); the
// 5.6.0 to 5.23.0 wheels (and 4.57's source) project each image apart (a
// loop over the images: unpad, reshape, pixel_unshuffle) and interpolate
// the grid to each with F.interpolate: nn.Lfm2VlVision.Before524.
// Measured on the CPU under 5.25.0 and 5.23.0: tools/oracle/lfm2vl.py,
// TestLFM2VLBefore524ImagesSaveAsTransformers.
var lfm2VLGatherSince = [2]int{5, 24}

// maskingUtilsSince is the first transformers release that builds the
// attention masks in masking_utils (the 4.53.0 wheel: a boolean mask,
// which SDPA converts to a bias at each call). Before it, MistralModel's
// _update_causal_mask (copied into Mixtral's, Phi-3's and Phi-3.5-MoE's)
// built one additive mask a forward in the model's dtype and SDPA took
// it as it was, so the layers keep one mask between them:
// nn.Attention.SharedMask, for the families whose windows everyWindow
// reads. Measured on the CPU under 4.52.4: TestSlidingWindowMaskOnce.
var maskingUtilsSince = [2]int{4, 53}

// useLoss sets how a causal LM's loss treats its logits and labels under
// transformers v: a model whose logits the loss upcasts (LogitsFP32, the
// causal-LM head; BertForMaskedLM's are not) with a cross-entropy, which
// pads the labels once it calls loss_function with them (PadLabels) and
// shifts the logits before. The families differ (each checked in the wheels named here and at the
// constants):
//   - those that call loss_function from 4.46 (Llama and the models built
//     like it): the forward's logits.float() before 4.46, the shift copy
//     before 4.49;
//   - bloom, falcon, gpt2, gpt_neox and opt: until 4.49 their own
//     CrossEntropyLoss on a shift copy in the model's dtype, never
//     upcast (no logits.float() in their 4.40.0 to 4.48.0 modelling
//     files); loss_function from 4.49.0;
//   - mamba and mamba2: lm_head(...).float() in the forward in every
//     release (4.45.0 to 5.17.0), the shift copy before mambaLossSince
//     and mamba2LossSince; falcon_mamba as mamba (5.25.0 upcasts, then
//     loss_function);
//   - mllama: lm_head(...).float() in the forward in every release
//     (4.45.0 to 5.17.0), the loss as Llama's.
func useLoss(m *core.Model, modelType string, v [2]int) {
	if m.Vocab == 0 || !m.LogitsFP32 || (m.Loss != "" && m.Loss != "cross_entropy") {
		return
	}
	shiftUntil, upcastAlways := padLabelsSince, false
	switch modelType {
	case "bloom", "falcon", "gpt2", "gpt_neox", "opt":
		if !atLeast(v, padLabelsSince) {
			m.ShiftLogits, m.LogitsFP32 = true, false
		}
		m.PadLabels = !m.ShiftLogits
		return
	case "mamba", "falcon_mamba":
		shiftUntil, upcastAlways = mambaLossSince, true
	case "mamba2":
		shiftUntil, upcastAlways = mamba2LossSince, true
	case "mllama":
		upcastAlways = true
	}
	m.ShiftLogits = !atLeast(v, shiftUntil)
	m.PadLabels = !m.ShiftLogits
	m.ForwardUpcast = upcastAlways || !atLeast(v, upcastInLossSince)
}

// ExpertsImpls are the experts_implementation values hf_config models.
func ExpertsImpls() []string { return []string{"grouped_mm", "eager"} }

// ropeCache is, for model_type modelType under transformers v, the
// positions of the cos and sin tables each attention layer's rotary
// embedding registers as buffers (nn.Attention.RopeCache), 0 for none:
// LlamaRotaryEmbedding builds them for max_position_embeddings until the
// 4.41.0 wheel (modeling_llama.py of 4.36.0 and 4.40.0; absent from
// 4.41.0), MistralRotaryEmbedding until 4.42.0 (present in 4.41.0,
// absent from 4.42.0). The defaults are LlamaConfig's 2,048 and
// MistralConfig's 4,096 x 32. Other families are not read.
func ropeCache(c *hfConfig, modelType string, v [2]int) int64 {
	switch {
	case modelType == "llama" && !atLeast(v, [2]int{4, 41}):
		return c.sizeOr("max_position_embeddings", 2048)
	case modelType == "mistral" && !atLeast(v, [2]int{4, 42}):
		return c.sizeOr("max_position_embeddings", 4096*32)
	}
	return 0
}

// setRopeCache sets the rotary tables' positions of every rotary attention
// layer of l. Their dtype is the parameters': from_pretrained builds the
// model under its torch_dtype, and module.to(dtype) casts buffers.
func setRopeCache(l core.Layer, positions int64) {
	if a, ok := l.(*nn.Attention); ok && a.Rope {
		a.RopeCache = positions
	}
	for _, c := range l.Children() {
		setRopeCache(c, positions)
	}
}

// useTransformers sets what depends on the transformers version: how a
// causal LM's loss copies and upcasts its logits (useLoss), whether
// SDPA gets the kv heads as they are (nn.Attention.EnableGQA), whether
// the layers share one attention mask (nn.Attention.SharedMask), the rotary
// tables Llama and Mistral keep as buffers (ropeCache), how Kimi K2.5's
// tower pools its patches (nn.KimiVision.IndexAddMerge), and from
// 5.0 how the MoE blocks of family fam store and run their experts
// (experts: "grouped_mm", "eager", or "" for the default, grouped_mm).
func useTransformers(m *core.Model, c *hfConfig, fam *hfFamily, version, experts string) error {
	if version == "" {
		version = DefaultTransformers
	}
	v, err := parseTransformers(version)
	if err != nil {
		return err
	}
	if err := refuseBidirectional(c, fam.modelType, v); err != nil {
		return err
	}
	v5 := atLeast(v, expertsSince)
	if experts != "" {
		switch {
		case !slices.Contains(ExpertsImpls(), experts):
			return &units.Error{Msg: fmt.Sprintf("experts must be \"grouped_mm\", \"eager\" or \"megatron\" (got %q)", experts),
				Hint: "transformers' experts_implementation; \"batched_mm\", \"deepgemm\" and \"sonicmoe\" are not modelled"}
		case !v5:
			return &units.Error{Msg: fmt.Sprintf("experts=%q needs transformers 5.0 or later (got transformers=%q)", experts, version),
				Hint: "transformers 4.x runs its MoE experts as nn.Linear modules in a loop; pass transformers=\"" + DefaultTransformers + "\" or leave it out (pip show transformers)"}
		}
	}
	ministral3 := false
	for _, l := range m.Layers {
		forAttention(l, func(a *nn.Attention) { ministral3 = ministral3 || a.QPosScale })
	}
	if ministral3 && !v5 { // models/ministral3: transformers PR #42498, in 5.0 (transformerlab-app PR #1065)
		return &units.Error{Msg: fmt.Sprintf("text_config's model_type \"ministral3\" needs transformers 5.0 or later (got transformers=%q)", version),
			Hint: "transformers 5.0 first ships Ministral3ForCausalLM: pass transformers=\"5.0.0\" (or the release the model trains with)"}
	}
	if fam.modelType == "stablelm" && c.raw["use_parallel_residual"] == true && !atLeast(v, stableLMParallelSince) {
		return &units.Error{Msg: fmt.Sprintf("config key \"use_parallel_residual\" needs transformers 4.40 or later for model_type \"stablelm\" (got transformers=%q)", version),
			Hint: "transformers 4.38 and 4.39 ignore it and build every layer sequential with a post_attention_layernorm the checkpoint does not hold: pass transformers=\"4.40.0\" or later"}
	}
	if fam.modelType == "lfm2_vl" && !v5 && slices.ContainsFunc(m.Layers, hasMoE) { // models/lfm2_moe: first in the 5.0.0 wheel (families.go)
		return &units.Error{Msg: fmt.Sprintf("text_config's model_type \"lfm2_moe\" needs transformers 5.0 or later (got transformers=%q)", version),
			Hint: "transformers 5.0 first ships Lfm2MoeModel: pass transformers=\"5.0.0\" (or the release the model trains with)"}
	}
	if fam.modelType == "nemotron_h" && strings.Contains(c.nemotronPattern(), "E") && !atLeast(v, nemotronLibrarySince) {
		return &units.Error{Msg: fmt.Sprintf("hybrid_override_pattern has E (MoE) layers, which transformers first builds in 5.3 (got transformers=%q)", version),
			Hint: "before 5.3 Nemotron-H runs the hub's modeling_nemotron_h.py (trust_remote_code), whose MoE layers memsh does not model: pass transformers=\"5.3.0\" or later"}
	}
	if fam.modelType == "nemotron_h" {
		setNemotronNorms(m.Layers, atLeast(v, nemotronNormSince))
	}
	if fam.modelType == "dbrx" {
		setDbrxSentinels(m.Layers, atLeast(v, sentinelsEPSince))
	}
	useLoss(m, fam.modelType, v)
	setEmbedScaleBuffer(m, fam.modelType, v)
	setGDN(m.Layers, v)
	setKDA(m.Layers, v)
	if fam.modelType == "mamba" || fam.modelType == "falcon_mamba" {
		setMambaSkipFP32(m.Layers, atLeast(v, mambaSkipFP32Since))
	}
	if fam.modelType == "roberta" || fam.modelType == "xlm-roberta" {
		setTokenTypeView(m.Layers, !atLeast(v, tokenTypeGatherSince))
	}
	if c.noTokenTypes {
		if fam.modelType != "bert" {
			return &units.Error{Msg: fmt.Sprintf("token_type_ids=False: model_type %q has no token types to leave out", fam.modelType),
				Hint: "only BERT's batches carry token_type_ids (RoBERTa's and XLM-RoBERTa's tokenizers hand none, as hf_config builds them); leave token_type_ids out"}
		}
		setBERTTokenTypes(m.Layers, atLeast(v, tokenTypeGatherSince))
	}
	if fam.modelType == "falcon" {
		setFalconShared(m.Layers, atLeast(v, falconSharedSince))
	}
	if fam.modelType == "gemma3n" || fam.modelType == "gemma3n_text" {
		setGemma3nIDs(m.Layers, atLeast(v, gemma3nClampIDsSince))
	}
	for _, l := range m.Layers {
		if kv, ok := l.(*nn.KimiVision); ok {
			kv.IndexAddMerge = atLeast(v, kimiIndexAddMergeSince)
		}
		if lv, ok := l.(*nn.Lfm2VlVision); ok {
			lv.Before524 = !atLeast(v, lfm2VLGatherSince)
		}
	}
	gqa := atLeast(v, gqaSince)
	noCacheMask := gqa && !atLeast(v, noCacheMaskBefore)
	sharedMask := decoderFamilyOf(fam.modelType).everyWindow && !atLeast(v, maskingUtilsSince)
	rc := ropeCache(c, fam.modelType, v)
	// Which releases make the rotary pair in every layer is Qwen2-VL's
	// and Qwen2.5-VL's fact; the other builders set it for all (GLM-4).
	qwenVL := fam.modelType == "qwen2_5_vl" || fam.modelType == "qwen2_vl"
	eachLayer := qwenVL && !atLeast(v, mropeOnceSince)
	for _, l := range m.Layers {
		forAttention(l, func(a *nn.Attention) {
			a.EnableGQA, a.SharedMask, a.NoCacheMask = gqa, sharedMask, noCacheMask
			a.PackedMask = v5 // masking_utils' packed rows (core/packing.go); 4.54-4.57 through NoCacheMask
			if qwenVL {
				a.RopeTablesEachLayer = eachLayer && a.RopeTables != ""
			}
		})
		if rc > 0 {
			setRopeCache(l, rc)
		}
	}
	if c.err != nil {
		return c.err
	}
	if !v5 {
		return nil
	}
	impl := experts
	if impl == "" {
		impl = "grouped_mm"
	}
	if setExperts(m.Layers, fam.experts, impl, v) == 0 && experts != "" {
		return &units.Error{Msg: fmt.Sprintf("experts=%q: model_type %q has no MoE blocks run by experts_implementation", experts, fam.modelType),
			Hint: "experts= applies to " + strings.Join(expertsModelTypes(), ", ") + "; leave it out for this model"}
	}
	if fam.experts != nil {
		m.PEFTExperts = peftExperts[fam.modelType] // PEFT converts LoRA targets on 5.x's 3-D experts
	}
	return nil
}

// ExpertsModelTypes are the model types whose MoE blocks transformers 5
// runs through experts_implementation (experts=), sorted.
func ExpertsModelTypes() []string { return expertsModelTypes() }

// expertsModelTypes are the families whose MoE blocks setExperts
// rebuilds (those with an experts entry in hfFamilies), sorted.
func expertsModelTypes() []string {
	var out []string
	for _, f := range hfFamilies {
		if f.experts != nil {
			out = append(out, f.modelType)
		}
	}
	slices.Sort(out)
	return out
}

// hasMoE says whether l's tree holds an nn.MoE.
func hasMoE(l core.Layer) bool {
	_, ok := l.(*nn.MoE)
	return ok || slices.ContainsFunc(l.Children(), hasMoE)
}

// forAttention calls f on every nn.Attention in l's tree.
func forAttention(l core.Layer, f func(*nn.Attention)) {
	if a, ok := l.(*nn.Attention); ok {
		f(a)
	}
	for _, c := range l.Children() {
		forAttention(c, f)
	}
}

// hfExperts is how transformers 5 rebuilds a family's MoE blocks (the
// family's modeling_*.py at 5.17.0): the experts become 3-D parameters
// run by experts_implementation, and the block and its router take the
// names and dtypes set here. The zero value renames nothing (gpt-oss).
type hfExperts struct {
	// block is the block's name when 5.x renames it ("mlp": Mixtral's
	// MixtralDecoderLayer.mlp and PhiMoE's, block_sparse_moe in 4.x);
	// "" keeps the name.
	block string
	// router is the router's name when 5.x renames it ("gate": the
	// TopKRouter parameter modules of Mixtral, Qwen2-MoE, Qwen3-MoE,
	// Qwen3-Next, Qwen3.5-MoE, Qwen3-VL-MoE; "router": PhiMoE's); "" keeps it.
	router string
	// weightsFP32 leaves the top-k weights in fp32 (Mixtral's router;
	// DeepseekV3Experts, which start from zeros_like(hidden_states) and
	// cast each fp32-weighted output to it).
	weightsFP32 bool
	// linearRouter keeps the router an nn.Linear (JambaSparseMoeBlock's
	// router until paramRouterSince; PhimoeTopKRouter subclasses
	// nn.Linear).
	linearRouter bool
	// paramRouterSince is the first release whose router is a parameter
	// module where the earlier releases' was an nn.Linear: quantization,
	// LoRA and freeze= no longer reach it. 5.0 for GraniteMoeTopKRouter
	// (4.x's GraniteMoeTopKGating.layer); 5.21.0 for JambaTopKRouter, an
	// nn.Module holding weight (5.20.0's JambaSparseMoeBlock.router is
	// nn.Linear, modeling_jamba.py of each wheel; PEFT's all-linear adapts
	// no Jamba router on 5.25.0, TestLoRAAllLinearAsPEFT); zero: none.
	paramRouterSince [2]int
	// keepRouterSince is the first release whose from_pretrained keeps
	// the router's weight fp32 in a bf16 or fp16 model (the family's
	// _keep_in_fp32_modules_strict lists "gate.weight": DeepSeek-V2's,
	// DeepSeek-V3's, the GLM MoE families' and Nemotron-H's from 5.24;
	// nn.MoE.KeepRouterFP32); zero: the block's own setting (ERNIE 4.5
	// MoE keeps its gate in every release it is in, decoder.go).
	keepRouterSince [2]int
	// keepScoreBias: _keep_in_fp32_modules_strict lists
	// "e_score_correction_bias" in every 5.x (the DeepSeek-V3 families;
	// nn.MoE.KeepScoreBiasFP32).
	keepScoreBias bool
	// noWNames: the experts are no longer named w1, w2, w3 (Mixtral's
	// and PhiMoE's 4.x experts were): 5.x's eager loop runs in
	// experts.<e>.gate_proj, up_proj and down_proj as every family's
	// does (TestHFTransformers5Experts).
	noWNames bool
}

// setExperts rebuilds the MoE blocks of a family whose transformers 5
// modelling memsh follows (modeling_mixtral.py, modeling_qwen2_moe.py,
// modeling_qwen3_moe.py, modeling_gpt_oss.py, modeling_deepseek_v3.py,
// modeling_jamba.py, modeling_phimoe.py at 5.17.0; ex is the family's
// hfExperts, nil for none): the experts as 3-D parameters run by experts
// ("grouped_mm": nn.MoEGroupedMM; "eager": the loop over the 3-D weights,
// nn.MoEFusedLoop), renamed as ex says. DeepseekV3TopkRouter keeps its
// name (gate) and its fp32 sigmoid scores, its selection now outside
// no_grad but on branches no gradient reaches, whose saved tensors die
// with the forward (Glm4MoeExperts, Glm4MoeLiteExperts,
// DeepseekV32Experts, GlmMoeDsaExperts and Kimi K2.5's DeepseekV3 text
// model are DeepseekV3Experts); Gemma 4's experts (nn.Gemma4MoE) take the
// implementation alone. Each block is copied, never changed in place (its
// parents are rewritten to hold the copy). v is the transformers release
// (5.18's sentinel handling, nn.MoE.SentinelsEP; the routers kept fp32).
// It returns how many blocks it rebuilt.
func setExperts(layers []core.Layer, ex *hfExperts, experts string, v [2]int) int {
	if ex == nil {
		return 0
	}
	// Blocks are shared by the layers (and parents) that hold them: each
	// is copied once, and each map takes a block, and its copy, to the
	// copy, so that a shared parent walked again keeps the copy it holds.
	moeCopies := map[*nn.MoE]*nn.MoE{}
	gemma4Copies := map[*nn.Gemma4MoE]*nn.Gemma4MoE{}
	rebuilt := 0
	impl := nn.MoEFusedLoop
	if experts == "grouped_mm" {
		impl = nn.MoEGroupedMM
	}
	var walk func(l core.Layer) core.Layer
	walk = func(l core.Layer) core.Layer {
		switch x := l.(type) {
		case *nn.MoE:
			if c, ok := moeCopies[x]; ok {
				return c
			}
			c := *x
			if ex.block != "" {
				c.Name = ex.block
			}
			if ex.router != "" {
				c.RouterName = ex.router
			}
			if ex.weightsFP32 {
				c.WeightsFP32 = true
			}
			if ex.linearRouter {
				c.LinearRouter = true
			}
			if ex.paramRouterSince != [2]int{} && atLeast(v, ex.paramRouterSince) {
				c.LinearRouter = false
			}
			if ex.noWNames {
				c.WNames = false
			}
			if ex.keepRouterSince != [2]int{} {
				c.KeepRouterFP32 = atLeast(v, ex.keepRouterSince)
			}
			c.KeepScoreBiasFP32 = ex.keepScoreBias
			c.Impl, c.SentinelsEP = impl, atLeast(v, sentinelsEPSince)
			moeCopies[x], moeCopies[&c] = &c, &c
			rebuilt++
			return &c
		case *nn.Gemma4MoE: // Gemma4TextExperts (gemma4.go), its own router
			if c, ok := gemma4Copies[x]; ok {
				return c
			}
			c := *x
			c.Impl = impl
			gemma4Copies[x], gemma4Copies[&c] = &c, &c
			rebuilt++
			return &c
		case *nn.LongcatLayer: // LongCat-Flash's shortcut MoE
			x.MoE = walk(x.MoE)
		case *nn.HyperConnection: // DeepSeek-V4's sub-blocks
			x.Inner = walk(x.Inner)
		case *nn.ScaledResidual: // MiniMax's residuals
			x.Layer = walk(x.Layer)
		case *nn.Parallel:
			for i, y := range x.Branches {
				x.Branches[i] = walk(y)
			}
		case *core.Sequential:
			for i, y := range x.Layers {
				x.Layers[i] = walk(y)
			}
		case *core.Residual:
			x.Layer = walk(x.Layer)
		case *core.Repeat:
			if x.Layer != nil {
				x.Layer = walk(x.Layer)
			}
			for i, y := range x.Blocks {
				x.Blocks[i] = walk(y)
			}
		}
		return l
	}
	for i, l := range layers {
		layers[i] = walk(l)
	}
	return rebuilt
}

// stableLMParallelSince is the first release whose StableLmDecoderLayer
// reads use_parallel_residual: the 4.40.0 wheel's configuration_stablelm.py
// has it, 4.38.0's and 4.39.3's have not (their layers are sequential).
var stableLMParallelSince = [2]int{4, 40}
