package importers

import "strings"

// torchtune's QAT recipes (qat_distributed.py, qat_single_device.py,
// qat_lora_finetune_distributed.py at bd2a0fc) read quantizer: and
// instantiate it; quantizer.prepare(model) (full QAT) swaps every
// nn.Linear whose in_features the groupsize divides for torchao's
// Int8DynActInt4WeightQATLinear, swap_lora_linear_with_qat (QAT-LoRA) only
// the LoRALinear modules (training/quantization.py). A tied output is
// TiedLinear, no nn.Linear, and is never swapped; an untied output is,
// and LinearCrossEntropyLoss then calls it on each chunk of hidden states
// (modules/loss/cross_entropy_loss.py: self.linear_projection(hidden_chunk)),
// fake-quantizing the whole output weight per chunk: not modelled.

// torchtune8da4w are the quantizer components of torchao's
// Int8DynActInt4WeightQATQuantizer (train(qat="8da4w")).
var torchtune8da4w = map[string]bool{
	"torchtune.training.quantization.Int8DynActInt4WeightQATQuantizer":           true,
	"torchtune.training.quantization.Int8DynActInt4WeightQATQuantizerModuleSwap": true,
	"torchao.quantization.qat.Int8DynActInt4WeightQATQuantizer":                  true,
	"torchao.quantization.qat.linear.Int8DynActInt4WeightQATQuantizer":           true,
}

// torchtune4w are torchao's Int4WeightOnlyQATQuantizer's components:
// understood, not modelled.
var torchtune4w = map[string]bool{
	"torchtune.training.quantization.Int4WeightOnlyQATQuantizer":           true,
	"torchtune.training.quantization.Int4WeightOnlyQATQuantizerModuleSwap": true,
	"torchao.quantization.qat.Int4WeightOnlyQATQuantizer":                  true,
	"torchao.quantization.qat.linear.Int4WeightOnlyQATQuantizer":           true,
}

// torchtuneTiedHeads are the builders whose output is TiedLinear
// (torchtune/models/*/_model_builders.py at bd2a0fc: tie_word_embeddings=True,
// Llama 3.2's by its default; Gemma's component builders always),
// without their lora_ or qlora_ prefix.
var torchtuneTiedHeads = map[string]bool{
	"llama3_2_1b": true, "llama3_2_3b": true,
	"gemma_2b": true, "gemma_7b": true, "gemma2_2b": true, "gemma2_9b": true, "gemma2_27b": true,
	"qwen2_0_5b": true, "qwen2_1_5b": true,
	"qwen2_5_0_5b": true, "qwen2_5_1_5b_base": true, "qwen2_5_1_5b_instruct": true, "qwen2_5_3b": true,
	"qwen3_0_6b_base": true, "qwen3_0_6b_instruct": true, "qwen3_1_7b_base": true, "qwen3_1_7b_instruct": true,
	"qwen3_4b_base": true, "qwen3_4b_instruct": true,
}

// torchtuneQAT reads quantizer: into qat=, qat_group_size= and qat_head=;
// fake_quant_after_n_steps leaves the steady step (after it) as it is.
func torchtuneQAT(t *tree, p *plan) error {
	some := false
	for k := range t.leaves {
		some = some || k == "quantizer" || strings.HasPrefix(k, "quantizer.")
	}
	if !some {
		t.get("fake_quant_after_n_steps") // without a quantizer the recipes raise first
		return nil
	}
	comp, err := t.str("quantizer._component_", "")
	if err != nil {
		return err
	}
	if comp == "" {
		return t.errorf("quantizer._component_", "torchtune's QAT recipes instantiate it: Int8DynActInt4WeightQATQuantizer", "missing")
	}
	switch {
	case torchtune4w[comp]:
		t.notModelledUnder("quantizer", "torchao's Int4WeightOnlyQATQuantizer (weights only, asymmetric, tinygemm's float zero point)")
		return nil
	case !torchtune8da4w[comp]:
		return t.errorf("quantizer._component_", "torchtune's QAT recipes take Int8DynActInt4WeightQATQuantizer or Int4WeightOnlyQATQuantizer (a post-training quantizer raises: not supported for finetuning)",
			"unknown quantizer %s", quoteKey(comp))
	}
	group, err := t.integer("quantizer.groupsize", 256, 1, 1<<20) // Int8DynActInt4WeightQATQuantizer's default
	if err != nil {
		return err
	}
	if pad, err := t.boolean("quantizer.padding_allowed", false); err != nil {
		return err
	} else if pad {
		t.notModelled = append(t.notModelled, "quantizer.padding_allowed: linears whose in_features the groupsize does not divide, padded and swapped")
	}
	if sp, err := t.str("quantizer.scales_precision", "torch.float32"); err != nil {
		return err
	} else if sp != "torch.float32" {
		t.notModelled = append(t.notModelled, "quantizer.scales_precision: "+sp+" weight scales (memsh keeps torchao's fp32)")
	}
	t.get("quantizer.precision")      // the recipe sets it to dtype (quantizer.precision = self._dtype)
	t.get("fake_quant_after_n_steps") // the steps after n are the QAT step memsh replays
	p.set("qat", str("8da4w"))
	if group != 256 {
		p.set("qat_group_size", num(group))
	}
	builder, _ := t.str("model._component_", "")
	builder = builder[strings.LastIndex(builder, ".")+1:]
	base := strings.TrimPrefix(strings.TrimPrefix(builder, "qlora_"), "lora_")
	lora := base != builder
	tied := torchtuneTiedHeads[base]
	if tied && strings.HasPrefix(base, "llama3_2_") {
		if tied, err = t.boolean("model.tie_word_embeddings", true); err != nil {
			return err
		}
	}
	if lora {
		if on, _ := t.boolean("model.apply_lora_to_output", false); !on {
			return nil // swap_lora_linear_with_qat reaches no output
		}
	}
	chunked := false
	for _, a := range p.train {
		chunked = chunked || a.key == "loss_chunks"
	}
	switch {
	case tied:
		p.set("qat_head", "False") // TiedLinear: no nn.Linear to swap
	case chunked:
		t.notModelled = append(t.notModelled, "quantizer: the untied output swapped under LinearCrossEntropyLoss's chunks (each chunk fake-quantizes the whole output weight; memsh leaves the output plain)")
		p.set("qat_head", "False")
	}
	return nil
}
