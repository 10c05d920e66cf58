package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// PEFT's prepare_model_for_kbit_training (peft/utils/other.py at
// 5d602fd; the same casts since peft 36c7e3b, February 2023), which QLoRA
// scripts call before get_peft_model and TRL's SFTTrainer called for
// models loaded in 4 or 8 bit until TRL moved it out (20cc2e1, December
// 2025; TRL's own copy of October 2025, fda88c6, upcast only the norms):
//
//   - every parameter stored in fp16 or bf16 that is not a bitsandbytes
//     Params4bit (embeddings, norms, lm_head, biases; int8 weights are
//     int8 and stay) becomes fp32: param.data = param.data.to(float32).
//     The LoRA adapters PEFT adds afterwards are fp32 too
//     (get_peft_model's autocast_adapter_dtype=True casts them to fp32 on
//     a bf16 or fp16 base), so their gradients and optimizer state are
//     fp32;
//   - with use_gradient_checkpointing=True (its default) it calls
//     enable_input_require_grads (the embedding's output requires grad:
//     Checkpoint.InputGrad; not when the kwargs say use_reentrant=False,
//     which a non-reentrant checkpoint here stands for) and
//     gradient_checkpointing_enable(gradient_checkpointing_kwargs={}):
//     transformers hands the empty kwargs to torch.utils.checkpoint, which
//     then falls back to use_reentrant=True (torch 2.15's
//     torch/utils/checkpoint.py, "use_reentrant = True" when it is None;
//     transformers' own default of None kwargs is not taken).
//
// The bitsandbytes matmuls still compute in bnb_4bit_compute_dtype (the
// plan's compute dtype) and cast their output back to their input's
// dtype, so without autocast the activations between them are fp32.
// Other quantizers (GPTQ, AQLM, EETQ, HQQ, torchao) skip the casts.

// KbitPrepared is the plan as prepare_model_for_kbit_training leaves it.
func (p *Plan) KbitPrepared() *Plan {
	q := *p
	q.KbitPrep = false
	if q.QuantFrom == units.InvalidDType {
		q.QuantFrom = p.Precision.Compute // what the weights were quantized from, as before the casts
	}
	prec := p.Precision
	prec.Name = p.Precision.Name + ", prepare_model_for_kbit_training"
	prec.Params, prec.Grads, prec.States = units.FP32, units.FP32, units.FP32
	prec.Master = units.InvalidDType
	prec.Norms = units.InvalidDType // fp32 with everything else
	q.Precision = prec
	if q.Checkpoint.Mode == "" || q.Checkpoint.Mode == "none" {
		q.Checkpoint = Checkpoint{Mode: "full", Every: 1, Reentrant: true}
	}
	// enable_input_require_grads unless the kwargs asked for
	// use_reentrant=False (a non-reentrant checkpoint here)
	q.Checkpoint.InputGrad = q.Checkpoint.InputGrad || q.Checkpoint.Reentrant
	return &q
}

// validateKbit checks a plan asking for prepare_model_for_kbit_training.
func (p *Plan) validateKbit() error {
	if !p.KbitPrep {
		return nil
	}
	switch p.Quant {
	case "nf4", "nf4-dq", "int8":
		return nil
	case "":
		return &units.Error{Path: "train", Msg: "peft_kbit=True prepares a model loaded in 4 or 8 bit (bitsandbytes): the plan quantizes nothing",
			Hint: `add quant="nf4", or drop peft_kbit`}
	default:
		return &units.Error{Path: "train", Msg: fmt.Sprintf("peft_kbit=True casts only bitsandbytes models: prepare_model_for_kbit_training skips its casts for quant=%q (torchao)", p.Quant),
			Hint: `use quant="nf4" (bitsandbytes), or drop peft_kbit`}
	}
}
