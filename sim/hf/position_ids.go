package hf

// noPositionIDs are the model types whose decoder layers are not handed
// a [1, seq] position_ids of their base model's making
// (core.Model.PositionIDs), as transformers 5.25.0's modelling files have them: BERT,
// BLOOM, Mamba, FalconMamba, Mamba-2 and Granite 4.0-H call their layers without
// position_ids, and so does ModernBERT, whose layers get the rotary
// cos and sin alone (ModernBertModel.forward, the
// hf_block_saved.py held list: TestModernBERTCheckpointSavesAsTransformers), and DeBERTa-v2,
// whose layers get the attention mask, relative_pos and rel_embeddings
// (TestDebertaCheckpointSavesAsTransformers); GPT-2's, GPT-Neo's and GPTBigCode's are the index their wpe lookup keeps besides (GPTNeoBlock is called without them: hf_block_saved.py's held list, TestGPTNeoSavesAsTransformers); MPT has none (ALiBi), XGLM none either (its sinusoidal table is added before the layers: hf_block_saved.py's held list, TestXGLMSavesAsTransformers); OPT's
// is a [batch, seq] cumsum of the attention mask; the multimodal-rotary
// models (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5, GLM-4.1V, GLM-4.5V)
// hand their layers a row of the [3 or 4, batch, seq] index get_rope_index
// makes, which memsh does not model yet. Every other family makes
// torch.arange(seq) + past_seen_tokens, unsqueezed (LlamaModel.forward,
// modeling_llama.py l. 379-380; 4.x: cache_position.unsqueeze(0)), and
// passes it to every decoder layer (l. 398).
var noPositionIDs = map[string]bool{
	"bert": true, "roberta": true, "xlm-roberta": true, "bloom": true, "mamba": true, "falcon_mamba": true, "mamba2": true, "granitemoehybrid": true,
	"modernbert": true, "deberta-v2": true, "gpt2": true, "gpt_bigcode": true, "gpt_neo": true, "xglm": true, "mpt": true, "opt": true,
	"qwen2_vl": true, "qwen2_5_vl": true, "qwen3_vl": true, "qwen3_vl_moe": true,
	"qwen3_5": true, "qwen3_5_moe": true, "glm4v": true, "glm4v_moe": true,
}

// handsPositionIDs says whether the family's decoder layers are called
// with its base model's position_ids (core.Model.PositionIDs).
func handsPositionIDs(modelType string) bool { return !noPositionIDs[modelType] }
