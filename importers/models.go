package importers

import (
	"maps"
	"slices"
)

// zooModel is a model of memsh's stdlib zoo (@stdlib//llm.star): the
// function and its size argument.
type zooModel struct{ fn, size string }

// expr is the model as a Starlark expression, after its load, as a
// trainer with its own model and loop runs it (torchtune, torchtitan): its loader yields the labels shifted, so
// nothing pads or copies them (torchtune's SFTDataset, datasets/_sft.py:165-176
// at bd2a0fc, shifts them and appends one ignored label; torchtitan's
// TextProcessor, hf_datasets/text_datasets.py:143-145 at b5bcd76c6, takes
// tokens[1:]); the loss reads them as they come (torchtune's
// _loss_step, recipes/full_finetune_single_device.py:551-564; torchtitan's
// cross_entropy_loss, components/loss.py:32-60). Their models make no
// position_ids of their own: torchtune's TransformerDecoder is handed
// input_pos only by a packed or context-parallel batch
// (data/_collate.py:267-270), torchtitan's Decoder the loader's
// positions (components/data/collators.py:56-78), batch tensors either way.
func (m zooModel) expr(p *plan) string {
	p.load("@stdlib//llm.star", m.fn)
	return call(m.fn, append([]string{str(m.size)}, ownLoop...)...)
}

// ownLoop are the keywords of a model run by a trainer with its own loop
// (zooModel.expr), the zoo's and hf_config's alike.
var ownLoop = []string{kw("pad_labels", "False"), kw("position_ids", "False")}

// ownLoopHF is hf_config of the --model config.json path, run by a
// trainer with its own loop: its builder takes the config's shapes, its
// loader and loss are its own (zooModel.expr).
func ownLoopHF(path string) string {
	return call("hf_config", append([]string{str(path)}, ownLoop...)...)
}

// torchtuneModels maps torchtune's model builders (torchtune.models.*;
// their lora_ and qlora_ variants build the same base) to the zoo model
// of the same shapes. A builder not listed needs --model CONFIG.json.
var torchtuneModels = map[string]zooModel{
	"llama2_7b":           {"llama", "7b"},
	"llama2_13b":          {"llama", "13b"},
	"llama2_70b":          {"llama", "70b"},
	"llama3_8b":           {"llama", "llama3-8b"},
	"llama3_1_8b":         {"llama", "llama3-8b"}, // Llama 3.1 changes the rope scaling, not a shape
	"llama3_70b":          {"llama", "llama3-70b"},
	"llama3_1_70b":        {"llama", "llama3-70b"},
	"llama3_3_70b":        {"llama", "llama3-70b"},
	"llama3_1_405b":       {"llama", "llama3-405b"},
	"mistral_7b":          {"mistral", "7b"},
	"gemma_2b":            {"gemma", "2b"},
	"gemma_7b":            {"gemma", "7b"},
	"qwen2_7b":            {"qwen2", "7b"},
	"qwen2_5_7b_base":     {"qwen2", "7b"}, // Qwen2.5-7B has Qwen2-7B's shapes
	"qwen2_5_7b_instruct": {"qwen2", "7b"},
	"phi3_mini":           {"phi3", "mini"},
	// Llama 3.2 and Qwen3 (torchtune/models/llama3_2 and qwen3
	// _model_builders.py at bd2a0fc: the zoo's shapes, the small ones'
	// output head tied; base and instruct alike).
	"llama3_2_1b":         {"llama", "llama3.2-1b"},
	"llama3_2_3b":         {"llama", "llama3.2-3b"},
	"qwen3_0_6b_base":     {"qwen3", "0.6b"},
	"qwen3_0_6b_instruct": {"qwen3", "0.6b"},
	"qwen3_1_7b_base":     {"qwen3", "1.7b"},
	"qwen3_1_7b_instruct": {"qwen3", "1.7b"},
	"qwen3_4b_base":       {"qwen3", "4b"},
	"qwen3_4b_instruct":   {"qwen3", "4b"},
	"qwen3_8b_base":       {"qwen3", "8b"},
	"qwen3_8b_instruct":   {"qwen3", "8b"},
	"qwen3_14b_base":      {"qwen3", "14b"},
	"qwen3_14b_instruct":  {"qwen3", "14b"},
	"qwen3_32b":           {"qwen3", "32b"},
	// Qwen2 and Qwen2.5's other sizes (qwen2 and qwen2_5
	// _model_builders.py at bd2a0fc).
	"qwen2_0_5b":            {"qwen2", "0.5b"},
	"qwen2_1_5b":            {"qwen2", "1.5b"},
	"qwen2_5_0_5b":          {"qwen2", "0.5b"},
	"qwen2_5_1_5b_base":     {"qwen2", "1.5b"},
	"qwen2_5_1_5b_instruct": {"qwen2", "1.5b"},
	"qwen2_5_3b":            {"qwen2", "3b"},
	"qwen2_5_14b_base":      {"qwen2", "14b"},
	"qwen2_5_14b_instruct":  {"qwen2", "14b"},
	"qwen2_5_32b_base":      {"qwen2", "32b"},
	"qwen2_5_32b_instruct":  {"qwen2", "32b"},
	"qwen2_5_72b_base":      {"qwen2", "72b"},
	"qwen2_5_72b_instruct":  {"qwen2", "72b"},
	"phi4_14b":              {"phi4", "14b"}, // phi4 _model_builders.py at bd2a0fc
}

// modelType is the model_type of the Hugging Face config the zoo model
// stands for: the zoo function's name, Phi-4's aside (a Phi3ForCausalLM).
func (m zooModel) modelType() string {
	if m.fn == "phi4" {
		return "phi3"
	}
	return m.fn
}

// ZooModel is the zoo model memsh check builds for a model a config names
// by its Hub id (hfModels): its stdlib function and size.
func ZooModel(id string) (fn, size string, ok bool) {
	m, ok := hfModels[id]
	return m.fn, m.size, ok
}

// HubModels lists the Hub ids the zoo serves, sorted.
func HubModels() []string {
	return slices.Sorted(maps.Keys(hfModels))
}
