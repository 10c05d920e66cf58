package models

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
)

// hfConfigBuiltins: hf_config, a model from a Hugging Face config.json.
func HfConfigBuiltins() []host.Builtin {
	return []host.Builtin{{
		Name: "hf_config",
		Sig:  `hf_config(path, attn="sdpa", arch=None, mtp=False, transformers="` + hf.DefaultTransformers + `", experts=None, linear_attn=None, processor=None, token_type_ids=True, pad_labels=None, position_ids=None, vocab_multiple=None, loss=None, forward_upcast=None)`,
		Doc: "A model from a Hugging Face config.json (path relative to the script, inside its folder tree or a folder " +
			"allowed with --allow-read; a regular file of at most 4 MiB; memsh downloads nothing: a Hub id such as " +
			"\"Qwen/Qwen3-8B\" gets the command that fetches its config.json), " +
			"built as transformers builds it, with the exact parameter count of the Hugging Face model " +
			"(tied weights once, buffers never). model_type may be " + strings.Join(hf.ModelTypes(), ", ") + ". " +
			"attn is the attention kernel the model runs with: \"eager\", \"sdpa\" or \"flash\" " +
			"(BLOOM runs eager whatever is asked, as transformers does, and Gemma 2's \"sdpa\" runs eager from transformers 5.21, which dropped its SDPA path; BERT's and RoBERTa's \"flash\" needs transformers 5.0 or later). arch picks the model class instead of " +
			"the config's architectures[0]: for BERT \"BertForMaskedLM\" (the default), \"BertModel\", " +
			"\"BertForSequenceClassification\" or \"BertForTokenClassification\", and the same four for roberta and xlm-roberta " +
			"(\"RobertaForMaskedLM\", \"XLMRobertaModel\", ...: BERT's layers with positions from pad_token_id + 1, RoBERTa's lm_head, " +
			"and a classification head of dense, tanh and out_proj on the first token in place of the pooler; one label is a regression, MSE); " +
			"vocab_multiple=N pads vocab_size (and text_config's) up to a multiple of N, embed_tokens' and lm_head's rows and the logits' width with it, " +
			"as resize_token_embeddings to a multiple leaves a model whose tokenizer has vocab_size tokens (Axolotl's resize_token_embeddings_to_32x: N = 32; None: as config.json says). " +
			"pad_labels= and position_ids= (None: as transformers has them) set model()'s: False for a trainer that runs its own loop " +
			"and loader on the config's shapes (torchtune's, torchtitan's: their labels come shifted, their models make no position_ids). " +
			"loss=\"flash_cross_entropy\" scores the logits with flash-attn's fused cross-entropy (model()'s loss of that name: the logits it reads saved, " +
			"one fp32 loss and log-sum-exp a row, no log-probabilities, the logits' gradient a new tensor) where a trainer calls the model without labels " +
			"and scores its logits itself (OpenRLHF's Actor: flash_attn.ops.triton.cross_entropy over the fp32 logits), its labels the trainer's own (no padded copy); " +
			"forward_upcast=True holds the logits in fp32 from the forward on (the model's output rebound to its fp32 copy, as transformers before 4.46 " +
			"and OpenRLHF's Actor do: train(keep_logits=True) then keeps the fp32 copy), None as the transformers release has it. " +
			"BERT's batches carry the tokenizer's token_type_ids ([batch, seq] int64, saved by the lookup), and token_type_ids=False leaves them out " +
			"(a tokenizer or collator without them), so the embeddings make their own from their buffer: from transformers 5.0 a [1, seq] gather, " +
			"its lookup broadcast over the batch, before a view of the buffer (bert only: RoBERTa's batches carry none already), " +
			"and for modernbert (ModernBERT, transformers 5.1: pre-norm layers without biases, a fused Wqkv with rope, GeGLU in one Wi, " +
			"every global_attn_every_n_layers-th layer global and the others seeing local_attention / 2 tokens either side, masked under \"sdpa\" and \"eager\" once the sequence reaches that, " +
			"the padded batch under every attn as transformers 5.1 and later run it) \"ModernBertForMaskedLM\", \"ModernBertModel\", \"ModernBertForSequenceClassification\" " +
			"(classifier_pooling \"cls\" or \"mean\") or \"ModernBertForTokenClassification\"; for deberta-v2 (DeBERTa-v3: deberta-v3-xsmall to -large, " +
			"mdeberta-v3-base; eager only, as transformers has no other path: \"sdpa\" runs eager) \"DebertaV2ForMaskedLM\", \"DebertaV2Model\", " +
			"\"DebertaV2ForSequenceClassification\" (ContextPooler on the first token) or \"DebertaV2ForTokenClassification\": each layer's disentangled " +
			"attention adds to q.k the content-to-position and position-to-content scores against the shared rel_embeddings (2 x position_buckets rows) " +
			"projected by that layer, gathered at the bucketed relative positions, and keeps both [batch x heads, seq, 2 x position_buckets] score tensors " +
			"for backward; for decoders the causal LM " +
			"(the default) or the base model (\"LlamaModel\": no head), a ForConditionalGeneration class only for the model types " +
			"transformers has one for (the vision-language ones and Qwen3.5's); a decoder's base model keeps the token " +
			"embedding's output (inputs_embeds) until its layers and final norm are done, as its forward does. " +
			"Layers that differ (DeepSeek's and GLM-4.5's dense and MoE layers, Gemma 3's local and global ones, gpt-oss's " +
			"sliding and full ones, Jamba's Mamba and attention layers) stack as layers.0, layers.1, ...; " +
			"Jamba's Mamba layers run the mamba_ssm kernels (use_mamba_kernels, as transformers trains them); " +
			"granite and granitemoe (IBM Granite 3.x) and granitemoehybrid (Granite 4.0-H) scale the embeddings by embedding_multiplier, " +
			"each residual branch by residual_multiplier and divide the logits by logits_scaling, new tensors that keep nothing; " +
			"granitemoehybrid's layer_types put a Mamba-2 layer (the mamba_ssm kernel, as mamba2() lowers it) or an attention layer " +
			"(rotary only with position_embedding_type \"rope\") before routed experts (a top-k softmax in fp32) plus a shared expert " +
			"(shared_mlp: one input_linear for gate and up, which LoRA targets as \"up\", and output_linear, \"down\"); " +
			"bamba (Bamba-9B, transformers 4.48) puts a Mamba-2 layer (as granitemoehybrid's) or, at attn_layer_indices, attention with rotary on half of each head before a SwiGLU MLP; " +
			"zamba2 (Zamba2-1.2B, -2.7B, -7B, transformers 5.17) runs Mamba-2 layers (the mamba_ssm kernel) and, at its \"hybrid\" layers_block_type, first a shared transformer block " +
			"(num_mem_blocks blocks taking turns, the weights tied across the layers that run one) over the hidden states concatenated with the embeddings, " +
			"with adapters of each call's own on gate_up_proj (and on q, k, v with use_shared_attention_adapter), then a linear whose output joins the Mamba layer's input; " +
			"recurrent_gemma (RecurrentGemma-2B, -9B, transformers 5.17) runs block_types' recurrent blocks (the RG-LRU as transformers' PyTorch loop; bf16 or fp32, autocast refused) " +
			"and local attention with rotary on half of each head, each before a gated MLP, the logits soft-capped; " +
			"falcon_h1 (Falcon-H1) runs a Mamba-2 mixer (the mamba_ssm kernel) and rotary attention side by side in every layer, " +
			"each on its own scaled copy of the normed input (ssm_in_multiplier, attention_in_multiplier), then an MLP; MoE blocks run as transformers 5 runs them " +
			"(below; before transformers=\"5.0\" as transformers 4.x's loop, moe(impl=\"loop\"), gpt-oss's 3-D experts \"fused_loop\"). mtp=True adds the multi-token prediction " +
			"modules the checkpoint holds (num_nextn_predict_layers of DeepSeek-V3 and GLM-4.5), which transformers does not build, " +
			"as DeepSeek and Megatron train them: embedding and head shared with the main model (the checkpoint's " +
			"copies of them are not counted). qwen2_5_vl (transformers 4.49) builds Qwen2_5_VLForConditionalGeneration: its vision tower " +
			"(model.visual, as vision_tower() builds one) after the text embedding, reading train(images=) and train(videos=) (each pair of frames run as an image); its " +
			"attention is \"flash\" or \"sdpa\". qwen2_vl (Qwen2-VL 2B, 7B, 72B, transformers 4.45) builds Qwen2VLForConditionalGeneration, the same with " +
			"Qwen2-VL's tower: LayerNorms with biases, fc1/fc2 MLPs of hidden_act (quick_gelu) int(embed_dim x mlp_ratio) wide, every block attending " +
			"within its whole image. idefics3 (Idefics3-8B, SmolVLM-256M, 500M and 2.2B, transformers 4.46) and smolvlm (SmolVLM2, 4.50) build " +
			"Idefics3ForConditionalGeneration and SmolVLMForConditionalGeneration: SigLIP's vision model and the connector (model.vision_model, " +
			"model.connector: pixel_shuffle by scale_factor, a Linear without bias) after the text embedding, reading train(images=) (each image's " +
			"longest edge resized to 4 x image_size, cut into tiles of image_size pixels plus the whole image as one tile, " +
			"(image_size/patch_size)²/scale_factor² image tokens a tile with the processor's tags; processor=\"preprocessor_config.json\" gives the image processor's " +
			"size longest_edge (in place of 4 x image_size) and do_image_splitting (false: every image one tile, its tokens and 3 tags), as lfm2_vl reads its own (below); smolvlm also train(videos=): every frame one tile " +
			"whatever its size, its tile's tokens and 3 tags), then text_config's Llama model " +
			"(model.text_model); lm_head is tied when the top level's tie_word_embeddings says so. " +
			"lfm2_vl (LFM2-VL 450M, 1.6B, 3B and LFM2.5-VL, transformers 4.57) builds Lfm2VlForConditionalGeneration: the SigLIP2 NaFlex tower and the projector " +
			"(model.vision_tower: patch_embedding, the position grid resized to each image, SigLIP layers; model.multi_modal_projector: pixel_unshuffle by " +
			"downsample_factor, layer_norm under projector_use_layernorm, linear_1, GELU, linear_2) after the text embedding, reading train(images=) as " +
			"Lfm2VlImageProcessor lays them out (an image within max_image_tokens resized to sides of multiples of patch x factor, a larger one cut into " +
			"min_tiles to max_tiles tiles of tile_size plus a thumbnail under use_thumbnail; every one padded to max_image_tokens x factor² patches; " +
			"processor= gives those options), then text_config's LFM2 or LFM2-MoE model (model.language_model); lm_head is tied unless tie_word_embeddings says false. qwen3_vl and qwen3_vl_moe (Qwen3-VL, transformers 4.57) build Qwen3VLForConditionalGeneration " +
			"and Qwen3VLMoeForConditionalGeneration: Qwen3's or Qwen3-MoE's text model after Qwen3-VL's vision tower (model.visual: patch_embed, " +
			"pos_embed resampled to each image, LayerNorm blocks, merger), reading train(images=), whose deepstack_merger_list features are " +
			"added to the hidden states at the image positions after the first decoder layers; Qwen3.5's ForConditionalGeneration " +
			"(qwen3_5, qwen3_5_moe; its config's architectures[0]) adds the same tower without deepstack; their attention is \"flash\" or \"sdpa\"; " +
			"their train(videos=) runs each pair of frames as an image after the timestamp the processor writes. " +
			"glm4v (GLM-4.1V-9B-Thinking, GLM-4.6V-Flash) builds Glm4vForConditionalGeneration: GLM-4.1V's vision tower (model.visual: patch_embed, " +
			"a position table resampled to each image by grid_sample, RMS-normed blocks, downsample, merger) after the text embedding, reading " +
			"train(images=) (each image resized as Glm4vImageProcessor does: sides rounded to multiples of 28 pixels within its pixel budget) or " +
			"train(videos=) (not both in a step: GLM-4V's videos use image tokens), then text_config's GLM-4 decoder with a multimodal rotary pair " +
			"made once a forward; its attention is \"flash\" or \"sdpa\"; glm4v_moe (GLM-4.5V, GLM-4.6V, transformers 4.56) builds Glm4vMoeForConditionalGeneration, " +
			"the same tower before GLM-4.5-Air's MoE text model. mllama builds MllamaForConditionalGeneration (Llama 3.2 Vision): " +
			"its tiled vision model and projector (model.vision_model, model.multi_modal_projector) after the text " +
			"embedding, reading train(images=) (every image is max_num_tiles tiles of image_size pixels whatever its size), " +
			"and the text model's gated cross-attention layers (cross_attention_layers) attending to the projected image " +
			"states; without images those layers are skipped, as transformers skips them; its attention is \"sdpa\"; " +
			"checkpoint= reaches the text layers only (transformers' vision encoder layers are not checkpointed). gemma3 (Gemma 3 4B, 12B, 27B, " +
			"transformers 4.50) builds Gemma3ForConditionalGeneration: its SigLIP vision tower and projector (model.vision_tower, " +
			"model.multi_modal_projector) after the text embedding, reading train(images=) (every image is resized to image_size pixels, " +
			"mm_tokens_per_image soft tokens whatever its size), then Gemma 3's text model, whose attention gets the images' mask in every " +
			"layer under \"sdpa\" (each image's tokens see one another); its attention is \"sdpa\" or \"eager\"; arch=\"Gemma3ForCausalLM\" " +
			"builds the text model alone. mistral3 (Mistral Small 3.1 and 3.2, transformers 4.50) builds Mistral3ForConditionalGeneration: " +
			"Pixtral's vision tower and the projector (model.vision_tower, model.multi_modal_projector) after the text embedding, reading " +
			"train(images=) (each image scaled down so its longer side is at most image_size pixels, each side rounded up to a multiple " +
			"of patch_size x spatial_merge_size, all of a micro-batch's patches one sequence, one [IMG] token a merged patch and one break " +
			"token a row in the text), then text_config's Mistral model (or Ministral 3's, model_type ministral3, transformers 5.0: q scaled by position after the rotation); under \"sdpa\" the tower's layers share one block-diagonal mask over " +
			"every patch (each image attends to itself; \"eager\" adds it to one score matrix over every patch), under \"flash\" none; the head is tied when both " +
			"tie_word_embeddings say so, as from_pretrained loads Mistral's checkpoints. internvl (the \"-hf\" checkpoints of InternVL3 and " +
			"InternVL3.5, transformers 4.52) builds InternVLForConditionalGeneration: InternViT and the projector (model.vision_tower, " +
			"model.multi_modal_projector) after the text embedding, reading train(images=) (each image cut into 1 to 12 tiles of " +
			"image_size pixels as GotOcr2ImageProcessor cuts them, and a thumbnail when there are several; every tile is one image to " +
			"the tower, its cls dropped and its patches pixel-shuffled by downsample_ratio: 256 <IMG_CONTEXT> tokens a tile between <img> " +
			"and </img>), then text_config's Qwen2 (InternVL3) or Qwen3 (InternVL3.5) model; the layers scale each branch by a learned " +
			"lambda_1, lambda_2; InternViT-6B's use_qk_norm (InternVL3-78B's, InternVL3.5-38B's and up) norms q and k over their whole width; the head is tied when both tie_word_embeddings say so. llava (llava-1.5 7B and 13B) builds " +
			"LlavaForConditionalGeneration: its CLIP vision tower and projector (model.vision_tower, model.multi_modal_projector: linear_1, " +
			"projector_hidden_act, linear_2) after the text embedding, reading train(images=) (every image cropped to image_size pixels, one " +
			"token a patch, the class token's too under vision_feature_select_strategy \"full\"), then text_config's llama, mistral or qwen2 " +
			"model (its absent sizes that model's defaults); the tower runs to vision_feature_layer (-2: the last layer but one), the layers " +
			"after it and post_layernorm get no gradient; its attention is \"flash\", \"sdpa\" or \"eager\". With a Pixtral " +
			"vision_config (mistral-community/pixtral-12b) the tower is Pixtral's, as under mistral3, and the projector LLaVA's (no norm, " +
			"no patch merger: one image token a patch, a break token a row); it needs vision_feature_layer -1 and " +
			"vision_feature_select_strategy \"full\". llava_next (LLaVA-NeXT: llava-v1.6 Mistral 7B, Vicuna 7B and 13B, " +
			"llama3-llava-next-8b; transformers 4.39) and llava_onevision (LLaVA-OneVision Qwen2 0.5B, 7B, 72B; transformers 4.45) build " +
			"LlavaNextForConditionalGeneration and LlavaOnevisionForConditionalGeneration: LLaVA's projector on AnyRes tiles, reading " +
			"train(images=) (each image fitted into the image_grid_pinpoints resolution that keeps most of it and cut into tiles of " +
			"image_size pixels after a base tile of the whole image, every tile through the tower; the tiles' patches laid out as one grid, " +
			"the padding's rows or columns dropped and model.image_newline closing every row, so a wide image has other tokens than a " +
			"square one), a CLIP tower to vision_feature_layer -2 (llava_next) or a SigLIP one to the last layer (llava_onevision, whose " +
			"grids past anyres_max_9's nine tiles of patches are interpolated down, and whose samples of several images run each as its " +
			"base tile and a newline, and whose train(videos=) runs every frame through the tower, its patches pooled 2 x 2, one newline a video). olmo2 (OLMo 2, " +
			"transformers 4.47) norms each sublayer's output rather than its input, q_proj's and k_proj's whole outputs (every head " +
			"at once, so tp is refused) and keeps its norms' fp32 rows. olmoe (OLMoE-1B-7B, transformers 4.45) norms q_proj's and " +
			"k_proj's whole outputs with Llama's RMSNorm (tp refused) and routes every layer's tokens to num_experts experts of " +
			"intermediate_size (top num_experts_per_tok, no shared expert; clip_qkv must be null). aria_text (Aria's language model) routes " +
			"every layer's tokens to moe_num_experts SiLU-gated experts (the top moe_topk logits, softmaxed over those k) beside one shared MLP " +
			"moe_num_shared_experts x intermediate_size wide (hidden_act must be silu). bitnet (BitNet b1.58 as its bf16 model) is Llama with " +
			"attn_sub_norm before o_proj and a gated MLP (hidden_act relu2 by default) with ffn_sub_norm before down_proj (tp refused); a bitnet " +
			"quantization_config is refused: bitlinear and offline autobitlinear are inference only, online autobitlinear (its QAT) is not modelled. olmo3 (OLMo 3 7B and 32B, transformers 4.57) is olmo2 whose " +
			"layer_types sliding_attention layers (by default three in four) slide over the last sliding_window keys (4096), " +
			"with a rotary cos and sin pair for each layer type. smollm3 (SmolLM3-3B, transformers 4.53) is Llama with no rotary " +
			"embedding in the layers no_rope_layers marks 0 (by default every no_rope_layer_interval-th, 4), sliding only with use_sliding_window. glm4 (GLM-4-0414, GLM-Z1) norms each sublayer's input and output " +
			"and rotates half of each head, the rotary cos and sin repeated in every layer. ernie4_5 (ERNIE-4.5-0.3B, transformers 4.54) is Llama with " +
			"use_bias on every projection, no attention dropout and its rope in fp32, on an fp32 cos and sin pair each layer repeats; " +
			"ernie4_5_moe (ERNIE-4.5-21B-A3B, 300B-A47B) adds moe_num_experts experts (top moe_k, an fp32 router with a selection bias) and " +
			"moe_num_shared_experts shared ones from moe_layer_start_index every moe_layer_interval-th layer. " +
			"nemotron_h's hybrid_override_pattern E layers (Nemotron 3 Nano 30B-A3B, transformers 5.3) are MoE blocks: DeepSeek-V3's sigmoid router (mixer.gate), " +
			"n_routed_experts experts with squared ReLU and no gate, one shared MLP of moe_shared_expert_intermediate_size. " +
			"The routers from_pretrained keeps in fp32 in a bf16 or fp16 model (_keep_in_fp32_modules_strict: ernie4_5_moe's, and from 5.24 DeepSeek's, GLM's and nemotron_h's gate.weight) " +
			"are stored in fp32 with their gradients and optimizer state. seed_oss (Seed-OSS-36B, transformers 4.56) is Llama " +
			"with attention_bias on q, k and v (default true), attention_out_bias on o, and attention_dropout and residual_dropout (0.1 each by default). " +
			"starcoder2 (StarCoder2 3B, 7B, 15B, transformers 4.39) norms with nn.LayerNorm, biases every projection (use_bias), runs an ungated " +
			"gelu_pytorch_tanh MLP (c_fc, c_proj), slides every layer over sliding_window and drops the embeddings and each sublayer's output. " +
			"exaone4 (EXAONE 4.0 32B and 1.2B, transformers 4.54) norms each sublayer's output and each head of q and k; its layer_types " +
			"sliding_attention layers (by default three in four) slide over sliding_window and alone rotate q and k, the full ones having no position encoding. " +
			"cohere2 (Command R7B, Command A, transformers 4.48) runs attention and MLP side by side on one fp32 LayerNorm without bias, " +
			"head_dim hidden_size / num_attention_heads; its sliding layers (layer_types, by default three in four) alone rotate q and k, " +
			"and the head multiplies the logits by logit_scale. " +
			"lfm2 (LFM2 350M to 2.6B, transformers 4.54) mixes each layer with a gated short convolution (conv: in_proj to B, C and x, a depthwise causal conv of conv_L_cache taps, " +
			"out_proj; transformers' own F.conv1d path, what runs without the causal-conv1d package) or, where layer_types (else full_attn_idxs) says full_attention, " +
			"GQA attention with q_layernorm and k_layernorm, then a SwiGLU feed_forward (w1, w3, w2) of block_ff_dim made 2/3 as wide under block_auto_adjust_ff_dim; " +
			"lfm2_moe (LFM2-8B-A1B, transformers 5.0) makes the feed_forward after the first num_dense_layers an MoE of num_experts experts, num_experts_per_tok a token, " +
			"picked by a sigmoid router in the activations' dtype with the expert_bias buffer. " +
			"lfm3 (LFM3-1.7B, transformers 5.23) norms each sublayer's output too (use_sandwich_norm), mixes with LFM2's conv or, where layer_types says " +
			"sliding_attention (over sliding_window) or full_attention, Qwen3's attention with a sigmoid gate a head (g_proj, use_attention_gate), q and k rotated in fp32, " +
			"and a SwiGLU feed_forward of intermediate_size as is. " +
			"hunyuan_v1_dense (Hunyuan-7B, -4B, -1.8B, -0.5B, transformers 4.56) is Llama norming each head of q and k after the rotary " +
			"embedding (query_layernorm, key_layernorm); it needs head_dim, which transformers 5.25.0 cannot build without; hunyuan_v1_moe (Hunyuan-A13B, 4.56) " +
			"makes every mlp a shared_mlp beside num_experts experts of intermediate_size, moe_topk a token (one value, or a list of equal ones), picked by gate.wg, an fp32 nn.Linear. " +
			"minimax (MiniMax-Text-01, transformers 5.15) takes each residual after its norm, scaled (x * full_attn_alpha_factor + self_attn(x) * full_attn_beta_factor, " +
			"linear_attn_ and mlp_ alike), mixes by lightning attention (qkv_proj, a torch loop over blocks of block_size positions with per-head decays, norm, " +
			"output_gate, out_proj) where layer_types says linear_attention, else Mixtral's attention, and routes every layer as Mixtral; sliding_window and " +
			"router_jitter_noise are refused. " +
			"minimax_m2 (MiniMax-M2, M2.1, M2.5, transformers 5.0) norms q_proj's and k_proj's whole outputs, turns the first rotary_dim of each head, " +
			"and routes every layer's tokens to num_experts_per_tok of num_local_experts experts by a sigmoid over fp32 logits with the e_score_correction_bias buffer. " +
			"minimax_m3_vl_text (MiniMax M3's text model, transformers 5.13) has Gemma's RMSNorms, q and k normed per head, a partial rope (rope_parameters' partial_rotary_factor), " +
			"on the layers layer_types (else sparse_attention_config) calls minimax_m3_sparse a lightning indexer (no gradient) whose picked key blocks become a [batch, heads, seq, seq] mask SDPA keeps, " +
			"and by mlp_layer_types (else moe_layer_freq) a dense MLP or a shared expert then num_local_experts experts behind a sigmoid router with a correction bias, all with gpt-oss's clamped GLU; flash is refused. " +
			"afmoe (Trinity-Mini, -Nano, transformers 5.0) norms each sublayer's input and output (Olmo2RMSNorm), norms each head of q and k, gates the attention output " +
			"by a gate_proj of its own, rotates and slides (sliding_window) only where layer_types (else all but every global_attn_every_n_layers-th) says sliding_attention, " +
			"and after num_dense_layers dense layers routes to num_experts_per_tok of num_experts experts by router.gate's sigmoid over fp32 logits with the expert_bias " +
			"parameter (no gradient) beside num_shared_experts shared ones; mup_enabled scales the embeddings by sqrt(hidden_size). " +
			"glm (glm-4-9b-chat-hf, transformers 4.46) is glm4 without its post-norms. " +
			"olmo (OLMo-1B-hf, OLMo-7B-hf, transformers 4.40) is Llama with attention_bias on q, k, v and o and fp32 LayerNorms without weight or bias; clip_qkv is refused. " +
			"stablelm (StableLM 2 1.6B, StableLM-3B-4E1T, transformers 4.38) is Llama with biased LayerNorms, use_qkv_bias, the first partial_rotary_factor of each head rotated, and use_parallel_residual (4.40 and later); qk_layernorm is refused. " +
			"mpt (MPT-7B, MPT-30B, transformers 4.32) runs MptAttention's own eager attention (ALiBi in fp32, a saved bool mask) whatever attn says, with bias-free LayerNorms and linears and a 4x GELU MLP; attn_config.clip_qkv is refused. " +
			"exaone (EXAONE 3.0, 3.5, transformers 5.24) is LlamaForCausalLM, as transformers builds it, with config.json's num_layers, activation_function and layer_norm_epsilon read as Llama's keys. " +
			"internlm3 (InternLM3-8B-Instruct, transformers 5.23) is LlamaForCausalLM, as transformers builds it, with config.json's qkv_bias and bias read as attention_bias and mlp_bias (which must agree) and InternLM3Config's defaults, 2 kv heads and head_dim 128. " +
			"iquestcoder (IQuest-Coder-V1, transformers 5.23) is LlamaForCausalLM, as transformers builds it, with IQuestCoderConfig's defaults, 8 kv heads and head_dim 128; clip_qkv and use_sliding_window are refused. " +
			"nemotron (Minitron-4B and -8B, Nemotron-Mini-4B, transformers 4.44) is Llama with attention_bias and mlp_bias, an up_proj, relu2, down_proj MLP, LayerNorm1P norms (weight + 1.0, saved) and the first partial_rotary_factor (0.5) of each head rotated. " +
			"xglm (XGLM 564M to 7.5B, transformers 4.49) scales its embeddings by sqrt(d_model), adds a sinusoidal table (a buffer) and runs pre-norm layers with XGLM's own eager attention (no SDPA nor flash path: attn=\"sdpa\" runs eager, \"flash\" is refused): q scaled before the product, the masked scores floored by torch.max, which keeps them; activation_dropout, layerdrop and add_cross_attention are refused. " +
			"gpt_neo (GPT-Neo 125M to 2.7B, transformers 5.0) is GPT-2's layer with q_proj, k_proj, v_proj and out_proj under attn.attention and GPT-Neo's own eager attention (no SDPA path: attn=\"sdpa\" runs eager): q and k in fp32, unscaled scores kept by torch.where over each layer's bool mask buffer of max_position_embeddings a side (attention_types' global and local layers alike: flash runs without the window). " +
			"gpt_bigcode (StarCoder, StarCoderBase, SantaCoder, transformers 4.54) is GPT-2's layer with nn.Linear projections and one fused c_attn, multi_query's single k and v head repeated by eager attention and read as it is by SDPA; add_cross_attention is refused. " +
			"gptj (GPT-J-6B, transformers 5.24) runs attention and a gelu_new MLP side by side on one LayerNorm, a rope on adjacent pairs of each head's first rotary_dim dims, q and k cast to fp32 by eager attention; lm_head has a bias; rotary_dim null is refused. " +
			"codegen (CodeGen 350M to 16B, transformers 5.24) is gptj's model with one unbiased qkv_proj whose output, laid out as 4 model-parallel shards, splits into q, v and k, each copied to heads (views with 4 heads), and rotary tables kept fp32, q and k cast to v's dtype after them; n_embd must be a multiple of 4. " +
			"vaultgemma (VaultGemma 1B, transformers 4.57) is Gemma 2 without post_attention_layernorm and post_feedforward_layernorm. " +
			"phi (Phi-1, Phi-1.5, Phi-2, transformers 4.37) runs attention (partial_rotary_factor of each head rotated) and a gelu_new MLP side by side on one LayerNorm, biased throughout, dropping each branch by resid_pdrop. " +
			"cohere (Command R, R+, Aya 23, Aya Expanse, transformers 4.39) is cohere2's parallel layer rotating q and k in every layer, without windows; use_qk_norm norms each head of q and k with a [heads, head_dim] weight. " +
			"hyperclovax (HyperCLOVAX-SEED-Think-14B, transformers 5.9) is granite with head_dim, Peri-LN post-norms after attention and MLP (use_post_norm, default true) and the logits multiplied by logits_scaling. " +
			"helium (Helium-1, transformers 4.49) is Llama with attention_bias on q, k and v only, RMSNorms weighting the fp32 rows and a rope on adjacent pairs. " +
			"diffllama (DiffLlama, transformers 5.13) is Llama whose attention runs twice, over each half of v's heads, the second call's output times a learned λ subtracted from the first's and group-normed (lambda_q1, lambda_k1, lambda_q2, lambda_k2 a layer); an odd num_key_value_heads and attention_dropout are refused, as transformers refuses them, and so are tensor and context parallelism. " +
			"hrm_text (HRM-Text, transformers 5.9) runs two stacks of Llama layers (weightless fp32 RMSNorms, q, k and v of num_attention_heads heads, a sigmoid gate_proj on the attention output) H_cycles x (L_cycles L calls, one H call), each call with the same weights; L_bp_cycles says how many L calls of each cycle run with grad, the others under no_grad; flash with prefix_lm, pipeline stages and sharded parameters are refused. " +
			"ministral (Ministral-8B-Instruct-2410, transformers 4.57) is Mistral whose layer_types sliding_attention layers slide over sliding_window (without layer_types every layer, over 4096 keys by default). " +
			"jais2 (Jais-2-8B-Chat, transformers 5.0) is Llama with q, k, v, o and an ungated squared-ReLU MLP (up_proj, down_proj) biased by default and LayerNorms with biases. " +
			"arcee (AFM-4.5B, transformers 4.53) is Llama with an ungated MLP (up_proj, relu2, down_proj); apertus (Apertus-8B, -70B, 4.56) " +
			"norms q and k per head, names its norms attention_layernorm and feedforward_layernorm and runs its ungated MLP with xIELU (Python path, two trained scalars a layer). " +
			"apertus1p5_text (Apertus 1.5's text model, transformers 5.24) is apertus with its lm_head pruned to output_vocab_size rows (the logits and loss that wide; tied and pruned is refused); " +
			"apertus1p5, the multimodal model, is refused (its vision and audio tokenizers are not modelled): its text_config as model_type apertus1p5_text reads the text model. " +
			"nanochat (karpathy's nanochat-d32, transformers 5.0) norms with weightless fp32 RMSNorms (the model's norm before the layers too), q and k after the rope (q_norm, k_norm), runs fc1, relu2 and fc2 " +
			"and soft-caps the logits at final_logit_softcapping (15 by default). " +
			"jetmoe (JetMoE-8B) is refused: its mixture of attention heads (q and o projections routed per token) is not modelled. " +
			"kolibri1 (Kolibri-1, transformers 5.20) is GLM-4's sandwich-normed layer around EXAONE 4.0's attention (q and k normed per head before the rope; layer_types' sliding layers, all but every fifth by default, " +
			"over sliding_window, 513, and the full ones without rope) and DeepSeek-V3's MoE: num_experts (384) of moe_intermediate_size and a shared expert, " +
			"the top-k of the fp32 logits plus the correction bias gated by the sigmoid of the gathered logits. " +
			"dots1 (dots.llm1, transformers 4.53) is DeepSeek-V3's MoE layout behind Qwen3's attention (per-head q_norm and k_norm, sliding layers by layer_types or max_window_layers). " +
			"longcat_flash (LongCat-Flash-Chat, -Thinking; transformers 5.25, \"sdpa\" or \"flash\") runs in each of num_layers layers two MLAs (self_attn.0, .1) and two MLPs (mlps.0, .1) " +
			"and one shortcut MoE (mlp) over the first MLP's input, added at the layer's end: n_routed_experts experts and zero_expert_num identity experts scored by an fp32 softmax router " +
			"(router.classifier, e_score_correction_bias), moe_topk a token, its zero slots still run by routed experts with weight zero. " +
			"mistral4 (Mistral Small 4's text model; transformers 5.15, \"sdpa\" or \"flash\") is DeepSeek-V3's MLA and MoE layout with q scaled by position (rope_parameters' llama_4_scaling_beta) " +
			"and a softmax router in the model's dtype (mlp.gate: group-limited top-k, renormalised, times routed_scaling_factor; no correction bias, nothing kept fp32). " +
			"sarvam_moe (sarvam-30b, transformers 5.24) is built as Glm4MoeForCausalLM, GLM-4.5's model, under SarvamMoEConfig: num_experts, num_shared_experts and use_qkv_bias read as n_routed_experts, n_shared_experts and attention_bias, the whole head rotated (partial_rotary_factor 1.0, or rope_parameters'), head_dim 64 and q and k normed by default. " +
			"param2moe (Param2-17B-A2.4B, transformers 5.25) is the same under Param2MoeConfig, whose defaults differ (64 experts, two shared, a tied head). " +
			"axk1 (A.X-K1, transformers 5.15) is DeepSeek-V3 with q always through its latent and each MoE block's output normed (mlp.post_mlp_layernorm); " +
			"its layers are mlp_layer_types', else first_k_dense_replace (1) dense ones, then sparse. " +
			"axk2 (A.X-K2, transformers 5.17) is DeepSeek-V3.2 whose q_gate_proj, from the q latent normed and not, makes q and an output gate a head (sigmoid, before o_proj), " +
			"with gated RMSNorms (norm, mlp.fc1, mlp.fc2 of gated_norm_rank) as every input_layernorm and the MoE layers' post_attention_layernorm. " +
			"dots3_note_text (Dots 3 Note's text model, transformers 5.23) is DeepSeek-V3.2's decoder whose latent attention scales its normed latents, norms the rope key (k_rope_only_layernorm) and gates each head (g_proj), " +
			"with indexed (the DSA indexer, fp32 rope tables), full (use_dsa false) and sliding layers (layer_types; sliding_window, their own sizes from the swa_ keys or per_layer_config) and one shared MLP of shared_experts_intermediate_size x n_shared_experts. " +
			"sarvam_mla (sarvam-105b, transformers 5.24) is built as DeepseekV3ForCausalLM under SarvamMLAConfig: num_experts and num_shared_experts read as n_routed_experts and n_shared_experts, q projected whole (q_lora_rank None), 128 experts, one shared and one dense layer by default. " +
			"persimmon (Persimmon-8B, transformers 4.53) is GPT-NeoX's fused attention (query_key_value, dense, biased) with qk_layernorm's LayerNorms over q's and k's heads, half of each head rotated (partial_rotary_factor), in sequential pre-norm LayerNorm layers with a relu2 MLP (dense_h_to_4h, dense_4h_to_h). " +
			"solar_open (Solar-Open-100B, transformers 5.0) is GLM-4.5's MoE (sigmoid router with the correction bias, shared experts) in every layer behind Llama's attention (head_dim 128 by default). " +
			"exaone_moe (K-EXAONE, transformers 5.1) is EXAONE 4.0's attention (q and k normed per head, sliding layers, unrotated global ones) in pre-norm layers whose MLP is dense or, by mlp_layer_types or first_k_dense_replace, DeepSeek-V3's MoE (num_experts, num_shared_experts). " +
			"minicpm3 (MiniCPM3-4B, transformers 5.13) is Llama's layers around DeepSeek-V2's latent attention (sdpa or flash), the embedding times scale_emb, each residual branch times scale_depth / sqrt(num_hidden_layers) and the final norm's output divided by hidden_size / dim_model_base before lm_head; attention_dropout is refused. " +
			"youtu (Youtu-LLM-2B, transformers 5.1) is Llama's layers around DeepSeek-V3's latent attention (sdpa or flash) with dense MLPs; attention_dropout is refused. " +
			"minicpm5_moe (MiniCPM5-15B-A2.5B, transformers 5.25) is Llama's attention with an output gate (one q_gate_proj yields each head's query and gate; every projection biased by attention_bias) in pre-norm layers whose MLP is dense or, by mlp_layer_types or first_k_dense_replace, DeepSeek-V3's MoE (n_routed_experts or num_local_experts, n_shared_experts); use_gated_attention false and partial_rotary_factor are refused. " +
			"A key config.json leaves out is read at its model type's config class's default, as transformers reads it (MistralConfig's num_key_value_heads 8, GptOssConfig's head_dim 64, DeepseekV3Config's q_lora_rank 1536, Qwen3MoeConfig's head_dim hidden_size / num_attention_heads; a text_config's at its text class's), and one the class defaults to None that transformers cannot build without is refused (NemotronConfig's num_key_value_heads, MinistralConfig's head_dim); docs/models.md, \"Keys config.json leaves out\". " +
			"The families on DeepSeek-V3's layout (deepseek_v2, deepseek_v3, deepseek_v32, glm_moe_dsa, glm4_moe, glm4_moe_lite, glm4v_moe, dots1, mistral4, solar_open, sarvam_moe, sarvam_mla, param2moe, exaone_moe, kimi_k25) read a routed key config.json leaves out (n_routed_experts, n_shared_experts, num_experts_per_tok, moe_intermediate_size, intermediate_size, first_k_dense_replace, norm_topk_prob, num_nextn_predict_layers, and the latent attention's q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim) at their config class's default, and attribute_map's names (num_local_experts) as the key they set; a key the class defaults to None (dots1's expert counts, deepseek_v2's num_experts_per_tok) is required, and moe_layer_freq other than 1 is refused (transformers never reads it). " +
			"hy_v3 (Hy3, transformers 5.6) is DeepSeek-V3's pre-norm layer around attention with q and k normed per head and an MLP that is dense or, by mlp_layer_types (default: layer 0 dense), an MoE of num_experts behind a fp32 sigmoid router with a correction bias and one shared expert of moe_intermediate_size x num_shared_experts, added in fp32 when enable_moe_fp32_combine. " +
			"mellum (Mellum2-12B-A2.5B, transformers 5.10) is qwen3_moe with sliding and full layers (layer_types, all full by default; a rotary pair a type) " +
			"and, by mlp_layer_types, a dense MLP of intermediate_size or the sparse block (all sparse by default; num_experts 64). " +
			"lara_mini (Lara-4-Mini, transformers 5.24) mixes Qwen3.5's Gated DeltaNet (its gated norm in fp32 with the weight's fp32 copy), sliding attention layers with a rotary embedding and full ones without (layer_types), Helium's fp32-weighted RMSNorms (q_norm and k_norm per head too) and Flint's MoE block in every layer: an fp32 softmax router over x.float() and weight.float(), 3-D experts and an ungated shared expert. " +
			"laguna (Laguna XS.2, transformers 5.7) has per-layer query heads (num_attention_heads_per_layer), sliding and full layers with their own rotary widths (rope_parameters per layer type), q and k normed per head, a softplus output gate from g_proj (gating: per head or per element), and a dense MLP or, by mlp_layer_types, a shared expert then num_experts behind a sigmoid router with a correction bias; moe_router_logit_softcapping and moe_apply_router_weight_on_input are refused. " +
			"mimo_v2_flash (MiMo-V2-Flash, transformers 5.13) has full layers and sliding ones (layer_types; sliding_window, or sliding_window_size + 1) with twice the kv heads and a sink a head, v heads of v_head_dim narrower than head_dim, v times attention_value_scale, each layer type its own partial rotary pair (rope_parameters per layer type, 0.334 by default), eager only (attn=\"sdpa\" runs eager, flash is refused), and a dense MLP or, by mlp_layer_types, n_routed_experts behind a sigmoid router with a correction bias, no shared expert; mtp=True is refused. " +
			"flint (Flint, transformers 5.21) is qwen3_moe's layers with gpt-oss's RMSNorm everywhere (q_norm and k_norm too), a sink a head in every layer (fp32), rotary sliding layers (layer_types, sliding_window 513) beside full ones without position encoding, eager only (fp32 scores of q and k cast to fp32, the softmax over the scores and the sink column; attn=\"sdpa\" runs eager, flash is refused), and a dense MLP on mlp_only_layers (default [0, 1]) or num_experts behind an fp32 sigmoid router plus an ungated shared_expert of shared_expert_intermediate_size. " +
			"qwen4_exp and qwen4_exp_text (Qwen4-Exp) are refused with the reason: their hyper-connection streams, per-query QSA indexer and hashed n-gram Per-Layer Embeddings are not modelled; so is hy_v4 (HY-V4): eager-only latent attention and hyper-connections without Sinkhorn; zaya (ZAYA1): its convolutional attention (CCA), fp32 residual scaling and MLP router carried across layers; zamba (Zamba v1): its mixer's per-head Mamba-1 scans (ZambaMambaMixer; zamba2 is read); kolibri1_1 (Kolibri 1.1): its indexed-attention layers (a no_grad key selector, NVFP4-rounded keys and values, keys and values read from an earlier layer); dory (Nemotron-Labs Dory): nGPT's unit-sphere norms, interpolating residuals and learned scales, and its recurrent loop over shared layers; inkling_text and inkling_mm_model (Inkling): a relative position bias from the hidden states, fp32 short convolutions and a shared-expert sink router; inkling2_text, inkling2, inkling2_loop_text and inkling2_loop (Inkling 2): attention residuals over earlier blocks on top of those, eager only. " +
			"cohere2_moe (transformers 5.12) is Cohere 2's parallel layer with head_dim from the config, RMSNorm where rms_norm_eps is set, dense MLPs (first_k_dense_replace, mlp_layer_types) and MoE ones (top-k softmax router, Mixtral's experts, num_shared_experts averaged or summed); expert_selection_fn \"sigmoid\" is refused. " +
			"cohere_compass_text (North-Micro-Vision's text model, transformers 5.16) is Cohere 2's parallel layer with an M-RoPE of [batch, seq, head_dim] tables per layer type (rope_parameters[type]; null: no rope), sliding layers by layer_types and logit_scale 1 by default; a rope_parameters without an entry for a layer type used is refused. " +
			"flex_olmo (FlexOlmo, transformers 4.57) is OLMo 2's layers (post-sublayer norms, q and k normed over all their heads) with OLMoE's MoE as the MLP (num_experts, default 7, num_experts_per_tok, default 5). " +
			"granitemoeshared (transformers 4.49) is granitemoe's layer with a shared_mlp of shared_intermediate_size (0: none) beside the experts. " +
			"cwm (Code World Model, transformers 5.0) is Llama's layer with unbiased attention (mlp_bias alone read), head_dim 128, and sliding-window layers " +
			"(layer_types, by default every fourth layer full, the others over sliding_window, 8192). " +
			"granite_swa (granite-swash-2b, transformers 5.15) is granite with sliding-window layers (layer_types, by default every fourth layer full), a learned sink per head (eager attention scales its output by sigmoid(logsumexp(scores) - sink); no SDPA path: attn=\"sdpa\" runs eager) and a rope base per layer (layer_rope_theta, 0 for none); granitemoe_swa (granite-swash-3b-a600m, transformers 5.15) is granitemoeshared's layer with that attention. " +
			"dbrx (DBRX Instruct and Base, transformers 5.15) reads d_model, n_heads, n_layers and the nested attn_config and ffn_config: bias-free LayerNorms, a fused Wqkv clamped to attn_config.clip_qkv (required: 5.25's clamp cannot run without it), and moe_num_experts experts stored as ffn.experts.mlp.w1, v1 and w2 behind ffn.router.layer's softmax, run by DBRX's own loop (experts= is refused); moe_jitter_eps, 0.0 included, keeps its router noise for the backward. " +
			"mamba (Mamba-1) runs its mixer with the mamba_ssm kernels " +
			"(mamba_inner_fn) under attn=\"sdpa\" or \"flash\", and transformers' PyTorch loop without them under " +
			"attn=\"eager\"; falcon_mamba (falcon-mamba-7b, transformers 5.25) always runs that PyTorch loop (5.25 has no fused path for its weightless dt, B and C norms; no SDPA path: attn=\"sdpa\" runs as eager). transformers is the version the model trains with, by default the latest stable release (" + hf.DefaultTransformers + ", December 2026; a later release is refused: memsh has not read it); " +
			"pass the release an older run used (pip show transformers) (a model_type newer than it is refused: " +
			"phi needs 4.37, " +
			"starcoder2 and cohere 4.39, " +
			"stablelm 4.38 (before 4.40 without SDPA: attn=\"sdpa\" runs eager; use_parallel_residual refused), " +
			"olmo 4.40, " +
			"nanochat 5.0, " +
			"nemotron 4.44, nemotron_h 4.48 (its E layers 5.3), " +
			"gpt_bigcode 4.54, " +
			"gpt_neo 5.0, " +
			"gpt_oss 4.55, " +
			"gptj 5.24, " +
			"codegen 5.24, " +
			"cwm 5.0, " +
			"vaultgemma 4.57 (attn=\"sdpa\" runs eager from 5.21), " +
			"exaone 5.24, " +
			"internlm3 5.23, " +
			"iquestcoder 5.23, " +
			"mpt 4.32, " +
			"deberta-v2 4.53, " +
			"cohere2 4.48, " +
			"cohere2_moe 5.12, " +
			"cohere_compass_text 5.16, " +
			"lfm2 4.54, " +
			"lfm2_moe 5.0, " +
			"lfm3 5.23, " +
			"glm (GLM-4-9B) 4.46, " +
			"glm4 (GLM-4-0414) 4.51, " +
			"hunyuan_v1_dense and hunyuan_v1_moe 4.56, " +
			"hy_v3 5.6, " +
			"kolibri1 5.20, " +
			"laguna 5.7, " +
			"lara_mini 5.24, " +
			"mellum 5.10, " +
			"mimo_v2_flash 5.13, " +
			"flint 5.21, " +
			"minimax_m2 and afmoe 5.0, " +
			"minimax_m3_vl_text 5.13, " +
			"diffllama 5.13, " +
			"dots1 and arcee 4.53, " +
			"dots3_note_text 5.23, " +
			"longcat_flash 5.25, " +
			"mistral4, minimax and axk1 5.15, " +
			"axk2 5.17, " +
			"solar_open 5.0, " +
			"sarvam_moe and sarvam_mla 5.24, " +
			"persimmon 4.53, " +
			"param2moe 5.25, " +
			"exaone_moe 5.1, " +
			"minicpm3 5.13, " +
			"jais2 5.0, " +
			"xglm 4.49, " +
			"youtu 5.1, " +
			"minicpm5_moe 5.25, " +
			"dbrx 5.15, " +
			"falcon_mamba 5.25, " +
			"bamba 4.48, " +
			"bitnet 4.52, " +
			"apertus 4.56, " +
			"apertus1p5_text 5.24, " +
			"aria_text 5.18, " +
			"granite, granitemoe and olmoe 4.45, " +
			"flex_olmo 4.57, " +
			"granitemoeshared 4.49, " +
			"granitemoehybrid 4.52, " +
			"granite_swa and granitemoe_swa 5.15, " +
			"falcon_h1, smollm3 and glm4v 4.53, " +
			"glm4_moe, ernie4_5, ernie4_5_moe and exaone4 4.54, " +
			"seed_oss 4.56, " +
			"helium 4.49, " +
			"hrm_text 5.9, " +
			"hyperclovax 5.9, " +
			"olmo3 and ministral 4.57, " +
			"gemma3n and gemma3n_text 5.6 (below), " +
			"gemma4_unified and gemma4_unified_text 5.10, " +
			"glm4_moe_lite, GLM-4.7-Flash, and ministral3, Ministral 3's text model, 5.0; deepseek_v32, DeepSeek-V3.2, " +
			"5.11, " +
			"and glm_moe_dsa, GLM-5, 5.2, " +
			"both \"sdpa\" only; deepseek_v4, DeepSeek-V4-Flash and -Pro, 5.8, " +
			"eager only " +
			"(attn=\"sdpa\" runs eager): hc_mult residual streams mixed by hyper-connections, sliding, compressed sparse (with an indexer) or heavily compressed attention by layer_types or compress_ratios, " +
			"hash-routed then top-k sqrt-softplus MoE layers with clamped SwiGLU experts, its MTP layer not built; kimi_k25, Kimi K2.5, 5.13: Kimi K2's DeepSeek-V3 text model after MoonViT and its projector (model.vision_tower, model.mm_projector), reading train(images=) (each image scaled to at most 16,384 patches of 14 pixels and padded to a multiple of 28 pixels a side, 2 x 2 patches a token); train(videos=) is refused): from 4.54, with attn=\"sdpa\", grouped-query " +
			"attention hands SDPA the kv heads as they are (enable_gqa=True) when no mask is passed (causal attention without " +
			"a sliding window, sinks or padding; head_dim up to 256; torch 2.5 or later, as runtime=\"cuda\" is); before 4.54, " +
			"and with a mask, repeat_kv expands k and v to every head first (copies the kernel saves). " +
			"A causal LM's loss before 4.49 copies all but the last position of the logits, upcast to fp32 " +
			"(shift_logits = logits[..., :-1, :].contiguous(); 4.49 pads the labels instead), and before 4.46 the " +
			"model's forward upcasts them (logits.float()), so a loop that keeps the output (train(keep_logits=True)) " +
			"keeps them in fp32. bloom, falcon, gpt2, gpt_neox and opt before 4.49 shift in the model's dtype and never " +
			"upcast; mamba and mamba2 upcast in the forward in every release and shift before 5.17 and 4.52; mllama " +
			"upcasts in the forward in every release (docs/models.md). " +
			"From transformers 5.0 the MoE blocks of " + joinAnd(hf.ExpertsModelTypes()) + " " +
			"store their experts as 3-D parameters (gate_up_proj, down_proj; the router a parameter module named gate, " +
			"Mixtral's block named mlp, its top-k weights kept in fp32; PhiMoE's router stays an nn.Linear module " +
			"named router, and Jamba's until 5.20 (from 5.21 a parameter module, JambaTopKRouter, which bitsandbytes and LoRA do not reach), PhiMoE's block named mlp; DeepSeek-V3's and GLM-4.5's experts weight in fp32 and sum in the hidden states' dtype) " +
			"and run them as experts= says, transformers' experts_implementation: \"grouped_mm\" " +
			"(the default: the routed copies sorted by expert, one grouped GEMM per projection, moe(impl=\"grouped_mm\")) or " +
			"\"eager\" (the per-expert loop over the 3-D weights, moe(impl=\"fused_loop\")); from 5.18 grouped_mm zeroes expert parallelism's " +
			"sentinel rows only when the experts are sharded (no masked_fill on one rank) and the loop's one_hot has experts + 1 classes; bitsandbytes and PEFT's " +
			"target_modules do not reach them; experts= on a model without these blocks is an error. " +
			"experts=\"megatron\" (with transformers=\"4.57.1\" or another 4.x release, as Megatron-Core builds its own modules from config.json) runs every MoE block as " +
			"Megatron-Core's TEGroupedMLP, moe(impl=\"grouped\"), for precision=\"megatron\" (Megatron-SWIFT's moe_grouped_gemm, memsh check's reading of `megatron sft`). PhiMoE's sparsemixer router is lowered as Mixtral's softmax top-k, in 4.x and 5.x alike. " +
			"deepseek_v2 (DeepSeek-V2-Lite, V2, V2.5) is DeepSeek-V3's layout with DeepseekV2TopkRouter: an fp32 weight applied in fp32, " +
			"softmax, top-k over all the experts (topk_method \"greedy\") or over the topk_group best of n_group groups " +
			"(\"group_limited_greedy\", whose masked_fill keeps a bool [tokens, experts] mask), the weights times routed_scaling_factor, " +
			"never renormalised (5.25.0 reads no norm_topk_prob), no correction bias. " +
			"qwen3_next (Qwen3-Next, transformers 4.57) and Qwen3.5 (qwen3_5, qwen3_5_moe and their _text model types, transformers 5.2; " +
			"the text model alone: arch=\"Qwen3_5ForCausalLM\" or \"Qwen3_5MoeForCausalLM\") stack Gated DeltaNet " +
			"layers (linear_attn) with gated attention every full_attention_interval-th layer (layer_types); linear_attn is their kernel: " +
			"\"fla\" (the default: flash-linear-attention's chunk_gated_delta_rule and causal-conv1d, with fla's fused gated norm before " +
			"transformers 5.15) or \"torch\" (transformers' fallback, which keeps every 64-token chunk's state for backward); mtp=True adds " +
			"their checkpoints' MTP layer. olmo_hybrid (Ai2's Olmo-Hybrid-7B, transformers 5.3) stacks the same Gated DeltaNet " +
			"(separate q_proj, k_proj, v_proj, a_proj, b_proj, g_proj, o_norm, o_proj; beta doubled with linear_allow_neg_eigval) in " +
			"Llama layers with OLMo 3's attention layers (layer_types, else every fourth), NoPE where rope_theta is null; linear_attn as above. " +
			"kimi_linear (Moonshot AI's Kimi-Linear-48B-A3B, transformers 5.17) stacks Kimi Delta Attention layers (the gated delta rule " +
			"with a decay per channel: q_proj, k_proj, v_proj and their short conv1d, forget_gate's f_a_proj, f_b_proj, dt_bias and A_log, " +
			"b_proj, g_a_proj, g_b_proj, o_norm, o_proj) and DeepSeek-V3's multi-head latent attention without rotary embeddings " +
			"(linear_attn_config's kda_layers and full_attn_layers, 1-based, else layer_types, else every fourth from the fifth), " +
			"DeepSeek-V3's experts after the first first_k_dense_replace layers (or as mlp_layer_types says); its linear layers run " +
			"transformers' torch chunk kernel (chunk_kimi_delta_attention, what it runs without flash-linear-attention, which keeps " +
			"[chunk, chunk, head_dim] products a 64-token chunk and head for backward): linear_attn=\"torch\" or left out; " +
			"\"fla\" (fla's chunk_kda) is not modelled. bailing_hybrid (inclusionAI's Ling 3, transformers 5.25) is Kimi Linear's layout with Ling's " +
			"KDA (full-rank f_proj and g_proj, the bounded forget gate of kda_safe_gate, conv1d, dt_bias and A_log kept fp32), MLA with its " +
			"rotary embedding and a per-head output gate (g_proj), full attention at the last layer of every layer_group_size, and per-layer " +
			"SwiGLU clamps after the activation (expert_swiglu_limit_list, share_expert_swiglu_limit_list); linear_attn as for kimi_linear. gemma4_text and gemma4 (Gemma 4, transformers 5.5; gemma4 builds Gemma4ForConditionalGeneration: its language model " +
			"(model.language_model), with a vision_config the vision tower and embed_vision, reading train(images=), with an audio_config " +
			"the audio tower's weights (no audio input is modelled); arch=\"Gemma4ForCausalLM\" builds the text model alone, past both) build the text models of E2B, E4B, the 26B A4B and 31B: Gemma 4's RMSNorm in fp32 (the weight applied before the cast back), " +
			"q, k and v normed per head, full-attention layers with global_head_dim and, with attention_k_eq_v, num_global_key_value_heads and the " +
			"keys as values; the 26B A4B's experts (router on the residual stream, experts= as above) beside a dense MLP; E2B's and E4B's " +
			"per-layer embeddings (hidden_size_per_layer_input: a table of layers x 256 per token, projected and added at the end of each layer) " +
			"and last layers reusing an earlier layer's keys and values (num_kv_shared_layers). attn=\"flash\" is refused " +
			"for heads wider than 256 (flash-attn 2's limit; the full layers' are 512). " +
			"gemma4_unified_text and gemma4_unified (Gemma 4 unified) build Gemma 4's text model without per-layer embeddings or MoE block " +
			"(their keys are ignored, as transformers ignores them), a window of 1024 by default; gemma4_unified's Gemma4UnifiedForConditionalGeneration " +
			"has no vision tower: embed_vision (LayerNorms, a dense patch projection, a factorized position table, a weightless RMSNorm and " +
			"embedding_projection over the processor's merged patches) reads train(images=), embed_audio's weight runs nothing, and with " +
			"use_bidirectional_attention \"vision\" (the default) every text layer gets a mask, images or not. " +
			"gemma3n_text and gemma3n (Gemma 3n E2B and E4B, modelled as transformers 5.6 and later build them: before 5.6 the layers " +
			"that share keys and values compute their own in training) build Gemma3nForCausalLM, for gemma3n on its text_config with " +
			"arch=\"Gemma3nForCausalLM\" (Gemma3nForConditionalGeneration and Gemma3nModel are refused: their MobileNet-V5 vision tower and audio " +
			"encoder are not modelled): altup_num_inputs AltUp streams of the hidden state (altup_projections before the layers, " +
			"altup_unembed_projections and their mean after), each layer predicting the streams from the active one (altup: router_norm, " +
			"modality_router, prediction_coefs), running LAuReL (laurel: a rank laurel_rank residual), attention and the MLP on it and " +
			"correcting every stream (correction_coefs clamped to altup_coef_clip in training, correct_output_scale), then the per-layer " +
			"embeddings' block as Gemma 4's; Gemma 4's RMSNorm, q, k and v norms and kv sharing (num_kv_shared_layers); intermediate_size " +
			"and activation_sparsity_pattern one value or one per layer, a layer with sparsity running the Gaussian top-k on its MLP's gate; " +
			"logits soft-capped by final_logit_softcapping. " +
			"llama4_text and llama4 (Llama 4 Scout and Maverick, transformers 4.51; llama4 builds " +
			"Llama4ForConditionalGeneration, its vision model and projector with it: train(images=) tiles each image as Llama4ImageProcessor does, " +
			"144 image tokens a tile of 336 pixels; arch=\"Llama4ForCausalLM\" builds the text model alone) " +
			"run their MoE blocks as transformers does in every release, every expert on every token (moe(impl=\"dense_bmm\")), " +
			"NoPE every no_rope_layer_interval-th layer and chunked attention on the others: from attention_chunk_size tokens " +
			"SDPA gets a mask, runs its memory-efficient kernel over every block and keeps the mask as a [batch, 1, seq, seq] bias " +
			"a layer; there is no flash path.",
		Fn: hfConfigFn,
	}}
}

// maxConfigBytes is the largest config.json hf_config reads: 4 MiB, a
// hundred times the largest configs on the Hugging Face hub (a few KiB to
// tens of KiB).
const maxConfigBytes = 4 << 20

func hfConfigFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var path string
	attn := "sdpa"
	var arch starlark.Value = starlark.None
	mtp, tokenTypes := false, true
	transformers := hf.DefaultTransformers
	var expertsV, linearV, procV, padV, posV, vocabV, lossV, upcastV starlark.Value = starlark.None, starlark.None, starlark.None, starlark.None, starlark.None, starlark.None, starlark.None, starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "path", &path, "attn?", &attn, "arch?", &arch, "mtp?", &mtp, "transformers?", &transformers,
		"experts?", &expertsV, "linear_attn?", &linearV, "processor?", &procV, "token_type_ids?", &tokenTypes,
		"pad_labels?", &padV, "position_ids?", &posV, "vocab_multiple?", &vocabV, "loss?", &lossV, "forward_upcast?", &upcastV); err != nil {
		return nil, err
	}
	var vocabMultiple int64
	if vocabV != starlark.None {
		n, ok := vocabV.(starlark.Int)
		v, exact := n.Int64()
		if !ok || !exact || v <= 0 {
			return nil, &units.Error{Msg: fmt.Sprintf("vocab_multiple must be a positive int (got %s)", vocabV.String()),
				Hint: "the multiple the vocabulary is padded to, e.g. vocab_multiple=32 (Axolotl's resize_token_embeddings_to_32x); None keeps config.json's vocab_size"}
		}
		vocabMultiple = v
	}
	procPath, procData := "", []byte(nil)
	if procV != starlark.None {
		s, ok := starlark.AsString(procV)
		if !ok || s == "" {
			return nil, &units.Error{Msg: fmt.Sprintf("processor must be the path of a preprocessor_config.json (got %s)", procV.Type()),
				Hint: "the checkpoint's image processor options (idefics3 and smolvlm read size, max_image_size and do_image_splitting; lfm2_vl its tiling and image token options); None (the default) takes the hub's"}
		}
		data, err := host.ReadScriptFile(thread, s, maxConfigBytes, "config files")
		if err != nil {
			if !strings.Contains(err.Error(), s) {
				err = fmt.Errorf("cannot read %s: %w", s, err)
			}
			return nil, err
		}
		procPath, procData = s, data
	}
	linearAttn := ""
	if linearV != starlark.None {
		s, ok := starlark.AsString(linearV)
		if !ok || s == "" {
			return nil, &units.Error{Msg: fmt.Sprintf("linear_attn must be \"fla\" or \"torch\" (got %s)", linearV.Type()),
				Hint: "the Gated DeltaNet kernel of qwen3_next, Qwen3.5 and olmo_hybrid; None (the default) is \"fla\""}
		}
		linearAttn = s
	}
	experts := ""
	if expertsV != starlark.None {
		s, ok := starlark.AsString(expertsV)
		if !ok || s == "" {
			got := expertsV.Type()
			if ok {
				got = `""`
			}
			return nil, &units.Error{Msg: fmt.Sprintf("experts must be \"grouped_mm\", \"eager\" or \"megatron\" (got %s)", got),
				Hint: "transformers' experts_implementation, or Megatron-Core's grouped experts; None (the default) is \"grouped_mm\" from transformers 5.0"}
		}
		experts = s
	}
	archName := ""
	if arch != starlark.None {
		s, ok := starlark.AsString(arch)
		if !ok || s == "" {
			return nil, fmt.Errorf("arch must be a model class name such as \"BertModel\" (got %s)", arch.Type())
		}
		archName = s
	}
	decl := host.CallerPos(thread)
	data, err := host.ReadScriptFile(thread, path, maxConfigBytes, "config files")
	if err != nil {
		if !strings.Contains(err.Error(), path) {
			err = fmt.Errorf("cannot read %s: %w", path, err)
		}
		if strings.Contains(err.Error(), "no such file") && hubID.MatchString(path) && !strings.HasSuffix(path, ".json") {
			_, name, _ := strings.Cut(path, "/")
			return nil, &units.Error{Msg: err.Error(),
				Hint: fmt.Sprintf("%q looks like a Hugging Face Hub id; hf_config reads a config.json and memsh downloads nothing: "+
					"hf download %s config.json --local-dir %s fetches it, then hf_config(%q) (memsh check finds a Hub id's config.json in the Hugging Face cache itself)",
					path, path, name, name+"/config.json")}
		}
		return nil, err
	}
	m, err := hf.FromConfigOptions(data, hf.Options{Attn: attn, Arch: archName, MTP: mtp, Transformers: transformers, Experts: experts,
		LinearAttn: linearAttn, Processor: procData, NoTokenTypes: !tokenTypes, VocabMultiple: vocabMultiple})
	if err != nil {
		var se *units.Error
		if errors.As(err, &se) {
			c := *se // name the file the user gave
			if procPath != "" && strings.Contains(c.Msg, "preprocessor_config.json") {
				c.Msg = strings.Replace(c.Msg, "preprocessor_config.json", procPath, 1)
			} else if strings.Contains(c.Msg, "config.json") {
				c.Msg = strings.Replace(c.Msg, "config.json", path, 1)
			} else {
				c.Path = path
			}
			return nil, &c
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := hfConfigLoss(m, path, lossV); err != nil {
		return nil, err
	}
	if m.ForwardUpcast, err = optBool(upcastV, "forward_upcast", m.ForwardUpcast); err != nil {
		return nil, err
	}
	if m.PadLabels, err = optBool(padV, "pad_labels", m.PadLabels); err != nil {
		return nil, err
	}
	if m.PositionIDs, err = optBool(posV, "position_ids", m.PositionIDs); err != nil {
		return nil, err
	}
	if m.PadLabels && (m.Vocab == 0 || (m.Loss != "" && m.Loss != "cross_entropy")) {
		return nil, fmt.Errorf("pad_labels=True needs a causal LM with loss=\"cross_entropy\" (%s has loss %q)", path, m.Loss)
	}
	if m.PositionIDs && !m.HasDecoderLayers() {
		return nil, fmt.Errorf("position_ids=True needs decoder layers to hand them to (%s has none)", path)
	}
	return NewModel(m, nil, decl), nil
}

// hfConfigLoss is hf_config's loss=: None keeps the model's own,
// "flash_cross_entropy" (core.FlashCE) scores a causal LM's logits with
// flash-attn's fused cross-entropy, the labels the trainer's own (no
// padded copy: pad_labels may turn it back on, and is then refused).
func hfConfigLoss(m *core.Model, path string, v starlark.Value) error {
	if v == starlark.None {
		return nil
	}
	s, ok := starlark.AsString(v)
	switch {
	case !ok || (s != "cross_entropy" && s != core.FlashCE):
		return &units.Error{Msg: fmt.Sprintf("loss must be \"cross_entropy\" or %q (got %s)", core.FlashCE, v.String()),
			Hint: "None (the default) keeps the model's own loss; \"" + core.FlashCE + "\" is flash-attn's fused cross-entropy over the logits (OpenRLHF's)"}
	case m.Vocab == 0 || (m.Loss != "" && m.Loss != "cross_entropy"):
		return fmt.Errorf("loss=%q needs a causal LM with loss \"cross_entropy\" (%s has loss %q)", s, path, m.Loss)
	case s == core.FlashCE:
		m.Loss, m.PadLabels, m.ShiftLogits = core.FlashCE, false, false
	}
	return nil
}

// joinAnd lists names as prose: "a, b and c".
func joinAnd(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// hubID is a Hugging Face Hub model id as from_pretrained takes one:
// "org/name" (a path of that shape ending in .json is a file's).
var hubID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$`)
