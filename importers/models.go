package importers

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
}
