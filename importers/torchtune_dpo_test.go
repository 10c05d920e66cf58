package importers

import "testing"

// TestTorchtuneDPO imports torchtune's DPO recipe configs (testdata/
// torchtune, README there names their commit): loss._component_ DPOLoss is
// the DPO recipes' step, train(preference = dpo(trainer = "torchtune")),
// its reference the policy with its adapters disabled under a LoRA builder
// (lora_dpo_single_device.py) or a copy of the model under a full one
// (full_dpo_distributed.py, on one GPU). batch_size counts pairs: the
// collator (padded_collate_dpo) concatenates a chosen and a rejected row
// for each, so a step processes twice the rows.
func TestTorchtuneDPO(t *testing.T) {
	runImportCases(t, []importCase{{
		name: "8B_lora_dpo_single_device",
		file: "torchtune/llama3_1_8B_lora_dpo_single_device.yaml",
		step: torchtuneStep(2*4, 8, 1, 1, 1, 1024),
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 4, seq = 1024, grad_accum = 8, precision = "bf16", optimizer = adamw(fused = True),
             lora = lora(rank = 8, alpha = 16, targets = ["q", "v", "o", "gate", "up", "down"], autocast_adapter_dtype = False), checkpoint = "full",
             preference = dpo(reference = "adapters", trainer = "torchtune"), gpu = "H100-80GB")`,
	}, {
		name: "8B_full_dpo on one GPU",
		file: "torchtune/llama3_1_8B_full_dpo.yaml",
		step: torchtuneStep(2*4, 8, 1, 1, 1, 512),
		opts: Options{Seq: 512, GPU: "H200"},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 4, seq = 512, grad_accum = 8, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = "full", preference = dpo(reference = "model", trainer = "torchtune"), gpu = "H200")`,
	}})
}

func TestTorchtuneDPOErrors(t *testing.T) {
	const config = "model:\n  _component_: torchtune.models.llama3_1.lora_llama3_1_8b\n  lora_attn_modules: ['q_proj', 'v_proj']\n  lora_rank: 8\n  lora_alpha: 16\n" +
		"batch_size: 4\ntokenizer:\n  max_seq_len: 1024\ndtype: bf16\nloss:\n  _component_: torchtune.rlhf.loss.DPOLoss\n"
	runErrorCases(t, []errorCase{
		{name: "the distributed recipe", file: "r.yaml", config: config, opts: Options{GPUs: 8},
			want: "r.yaml:11: key loss._component_: not modelled: the distributed DPO recipes (FSDP2 over the policy, and under full_dpo_distributed.py over the reference copy too)", wantHint: "--gpus 1"},
		{name: "SimPO", file: "r.yaml", config: config, overrides: []string{"loss._component_=torchtune.rlhf.loss.SimPOLoss"},
			want: "command line: key loss._component_: unknown loss torchtune.rlhf.loss.SimPOLoss", wantHint: "DPOLoss and RSOLoss"},
	})
}
