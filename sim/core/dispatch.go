package core

import (
	"fmt"
	"math"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// Overheads is how the step's kernels are launched and what the step costs
// outside the GPU's work; the time model (sim/timing/dispatch.go) reads
// them, the memory replay does not. (How unevenly experts are loaded is
// the layout's expert_load, Parallelism.ExpertLoad: it sizes the busiest
// rank's routed rows, so memory and time both follow it.)
type Overheads struct {
	// Dispatch: "eager" (PyTorch runs each op as its own kernel, launched
	// from Python), "fused" (hand-fused kernels, as Megatron-LM with
	// Transformer Engine or Liger run: each chain of elementwise ops is one
	// kernel), "compiled" (torch.compile: Inductor fuses elementwise
	// chains and launches from generated code), "cuda_graphs" (compiled
	// and replayed as CUDA graphs: no CPU cost per kernel). "" is "fused"
	// for precision "megatron" and "eager" otherwise.
	Dispatch string
	// StepSeconds is what each step spends outside the GPU's work: the data
	// loader, the Python training loop, logging. 0 unless set.
	StepSeconds float64
	// ClipGradNorm is the max norm of torch.nn.utils.clip_grad_norm_, run
	// on the gradients before each optimizer step (the Hugging Face
	// Trainer's max_grad_norm, 1.0 unless set; torchtitan's max_norm); 0
	// clips nothing. The norm's value does not change the time.
	ClipGradNorm float64
	// TrainMetrics is the cross-entropy metrics the training loop
	// computes on each micro-batch's logits after its backward, under
	// no_grad in the precision's autocast: Composer's trainer
	// (composer/trainer/trainer.py @v0.16.4, _train_microbatch ->
	// _eval_train_metrics) updates every train metric of the model, and
	// llm-foundry's MPT has two (LanguageCrossEntropy and
	// LanguagePerplexity, each a torch.nn.CrossEntropyLoss over the
	// logits: composer/metrics/nlp.py; use_train_metrics defaults to
	// True, llmfoundry/models/mpt/modeling_mpt.py @061f2c7). 0: none.
	TrainMetrics int64
}

// DispatchModes lists the dispatch modes.
func DispatchModes() []string { return []string{"eager", "fused", "compiled", "cuda_graphs"} }

// Validate checks the dispatch mode, the step overhead and the clipping
// norm.
func (o Overheads) Validate() error {
	known := false
	for _, m := range DispatchModes() {
		known = known || o.Dispatch == m
	}
	if o.Dispatch != "" && !known {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("unknown dispatch %q (known: %s)", o.Dispatch, strings.Join(DispatchModes(), ", "))}
	}
	if !(o.StepSeconds >= 0) || math.IsInf(o.StepSeconds, 0) {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("step_overhead must be a number of seconds >= 0 (got %g)", o.StepSeconds)}
	}
	if o.TrainMetrics < 0 {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("train_metrics must be a count >= 0 (got %d)", o.TrainMetrics),
			Hint: "train_metrics=2 is Composer's two language-model metrics (LanguageCrossEntropy, LanguagePerplexity); 0 computes none"}
	}
	if !(o.ClipGradNorm >= 0) || math.IsInf(o.ClipGradNorm, 0) {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("clip_grad_norm must be a norm > 0, or None (got %g)", o.ClipGradNorm)}
	}
	return nil
}
