package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// Precision is a mixed-precision policy: the dtype of each kind of tensor.
type Precision struct {
	Name     string
	Params   units.DType // stored weights
	Compute  units.DType // activations of matmuls (the autocast dtype)
	Grads    units.DType // parameter gradients
	Master   units.DType // fp32 master copy of the weights, InvalidDType when none
	States   units.DType // optimizer moments
	Autocast bool        // torch.autocast: weight copies cached per matmul, fp32-list ops in fp32
	// Norms is the dtype of RMSNorm weights when it is not Params
	// (InvalidDType): QLoRA through TRL's SFTTrainer keeps them in fp32
	// (peft's prepare_model_for_kbit_training upcasts every non-quantized
	// weight, peft_module_casting_to_bf16 casts embeddings and lm_head
	// back but keeps norms in fp32), so weight * x promotes the norm's
	// output, and what follows it, to fp32. Their storage is counted in
	// the params dtype (a few MB).
	Norms units.DType
	// Megatron is true when Megatron-LM (Megatron-Core with Transformer
	// Engine) runs the step, whatever its dtypes: its fused kernels
	// (megatron_kernels.go), its batch (megatron_batch.go), its
	// main-gradient buffers and distributed optimizer, its overlapped
	// tensor-parallel communication. The "megatron" policy sets it, and
	// keeps it under changed dtypes (precision("megatron", grads="bf16"):
	// --grad-reduce-in-bf16; params="fp16", compute="fp16": --fp16).
	Megatron bool
	// MasterClone is true when the optimizer keeps its Master copy even
	// in the params' dtype: DeepSpeed's ZeRO optimizers clone their
	// partition (DeepspeedPolicy, zero_precision.go). Otherwise a master
	// in the params' dtype is no copy at all.
	MasterClone bool
}

// HasMaster reports whether the optimizer keeps a master copy of the
// weights it steps.
func (p Precision) HasMaster() bool {
	return p.Master != units.InvalidDType && (p.Master != p.Params || p.MasterClone)
}

// NormDType is the dtype of RMSNorm weights.
func (p Precision) NormDType() units.DType {
	if p.Norms == units.InvalidDType {
		return p.Params
	}
	return p.Norms
}

// Precisions returns the named policies.
//
//   - fp32: everything fp32.
//   - bf16-mixed / fp16-mixed: torch.autocast over fp32 weights (Lightning's
//     "bf16-mixed", HF Trainer's bf16=True): fp32 params, grads and AdamW
//     state; bf16 copies of weights cached during forward; layer_norm,
//     softmax, log_softmax and reductions run in fp32 (the CUDA autocast
//     fp32 op list, torch/csrc/autograd/autocast_mode.cpp).
//   - bf16 / fp16 (pure, Lightning "bf16-true"): weights, grads and state in bf16.
//   - megatron: bf16 params and activations, fp32 main grads, fp32 master
//     weights, fp32 Adam state (Megatron-LM --bf16, 18 bytes/param with the
//     distributed optimizer, Megatron-LM issue #654), run by Megatron-LM
//     (Precision.Megatron).
//   - fp16-master: fp16 params and grads, fp32 master and moments: the
//     ZeRO paper's mixed-precision Adam (2+2+12 bytes/param).
func Precisions() []Precision {
	return []Precision{
		{Name: "fp32", Params: units.FP32, Compute: units.FP32, Grads: units.FP32, States: units.FP32},
		{Name: "bf16-mixed", Params: units.FP32, Compute: units.BF16, Grads: units.FP32, States: units.FP32, Autocast: true},
		{Name: "fp16-mixed", Params: units.FP32, Compute: units.FP16, Grads: units.FP32, States: units.FP32, Autocast: true},
		{Name: "bf16", Params: units.BF16, Compute: units.BF16, Grads: units.BF16, States: units.BF16},
		{Name: "fp16", Params: units.FP16, Compute: units.FP16, Grads: units.FP16, States: units.FP16},
		{Name: "megatron", Params: units.BF16, Compute: units.BF16, Grads: units.FP32, Master: units.FP32, States: units.FP32, Megatron: true},
		{Name: "fp16-master", Params: units.FP16, Compute: units.FP16, Grads: units.FP16, Master: units.FP32, States: units.FP32},
	}
}

// LookupPrecision finds a named policy.
func LookupPrecision(name string) (Precision, error) {
	alias := map[string]string{"bf16-true": "bf16", "fp16-true": "fp16", "32": "fp32", "32-true": "fp32", "amp": "bf16-mixed", "mixed": "bf16-mixed"}
	if a, ok := alias[name]; ok {
		name = a
	}
	for _, p := range Precisions() {
		if p.Name == name {
			return p, nil
		}
	}
	return Precision{}, fmt.Errorf("unknown precision %q (known: fp32, bf16-mixed, fp16-mixed, bf16, fp16, megatron, fp16-master, or precision(...))", name)
}

// Validate checks a custom policy.
func (p Precision) Validate() error {
	for _, d := range []struct {
		what string
		dt   units.DType
	}{{"params", p.Params}, {"compute", p.Compute}, {"grads", p.Grads}, {"optimizer_states", p.States}} {
		if d.dt == units.InvalidDType {
			return fmt.Errorf("precision: %s dtype must be set", d.what)
		}
		if !d.dt.Float() && d.what != "optimizer_states" {
			return fmt.Errorf("precision: %s dtype must be a float type (got %s)", d.what, d.dt)
		}
	}
	return nil
}
