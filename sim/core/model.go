package core

import (
	"math"

	"github.com/memsh/memsh/sim/units"
)

// Model is a whole network: layers in order, then (when Vocab is set) an
// output head to the vocabulary, then the loss.
type Model struct {
	Name          string
	Layers        []Layer
	Loss          string // cross_entropy | mse | none
	Vocab         int64  // adds lm_head (dim -> vocab) when > 0
	TieEmbeddings bool   // lm_head shares the first embedding's weight
	HeadBias      bool
	// HeadName is the output layer's module path; "" = lm_head. An
	// encoder's masked-LM decoder sits deeper in its head (BERT's
	// cls.predictions.decoder, RoBERTa's lm_head.decoder).
	HeadName   string
	LogitsFP32 bool // logits upcast to fp32 before the loss (Hugging Face causal LMs)
	// ShiftLogits: the causal-LM loss of transformers before 4.49 shifts
	// the logits, not the labels: shift_logits = logits[..., :-1,
	// :].contiguous() (LlamaForCausalLM.forward in the 4.40.0 and 4.45.2
	// wheels, ForCausalLMLoss in loss/loss_utils.py of 4.46.0 and 4.48.0;
	// 4.49.0 pads the labels instead). The loss reads an fp32 copy of all
	// but the last position, whose backward (SliceBackward0) makes a
	// gradient of the whole logits' size; the labels are shifted beside
	// them (labels[..., 1:].contiguous(), loss_labels.go).
	ShiftLogits bool
	// PadLabels: the causal-LM loss of transformers 4.49 and later shifts
	// the labels: nn.functional.pad(labels, (0, 1)), then labels[...,
	// 1:].contiguous() (ForCausalLMLoss, loss/loss_utils.py): a padded
	// int64 copy, and at a batch over 1 a shifted one (loss_labels.go).
	PadLabels bool
	// ForwardUpcast: the model's forward upcasts the logits (logits =
	// logits.float(), transformers before 4.46, which moved the upcast
	// into loss_function), so its output holds them in fp32: what a loop
	// that keeps the output (keep_logits) keeps.
	ForwardUpcast bool
	// HoldsEmbedding: the model's forward keeps its token embedding's
	// output in a local until the layers and the final norm are done
	// (transformers' decoders: inputs_embeds, with hidden_states =
	// inputs_embeds before the layer loop), so it is freed there, not
	// after the first layer's last use of it.
	HoldsEmbedding bool
	// PositionIDs: the model's forward makes position_ids once, before its
	// layers, and calls each decoder layer (each block of a repeat() under
	// its sequentials, as BlockPaths finds them) with it as a keyword
	// argument, as transformers' decoders do: a checkpointed layer holds it
	// into its backward (forward_once.go, Builder.handPositionIDs). Not
	// under Megatron's kernels, nor on a pipeline stage (lowerModel).
	PositionIDs   bool
	LogitSoftcap  float64    // Gemma 2's final_logit_softcapping: logits -> cap * tanh(logits / cap); 0 = none
	InputDim      int64      // features per position for models that start without an embedding; 0 = inferred
	InputGrad     bool       // the input requires grad (a block measured on its own, as the oracle does)
	Points        int64      // graph models: grid points per sample; the input is [batch, Points, InputDim]
	ShardedPoints bool       // graph models: each GPU of cp reads its ceil(Points/cp) rows of the grid (anemoi's keep_batch_sharded)
	Data          *DataBatch // the data loader's batch the input is built from; nil: the input is the batch
	// NativeLoRA: the model's own LoRA layers (LitGPT's), built with the
	// model and in its dtype: PEFT's fp32 adapters (Plan.AdapterDType) do
	// not apply.
	NativeLoRA bool
	// PEFTExperts names the table PEFT (0.20 on) converts LoRA targets by
	// on this model (lora_experts.go): "mixtral" or "qwen2_moe", the
	// transformers 5 MoE families whose experts are 3-D parameters and
	// whose checkpoints transformers converts from 4.x's per-expert
	// nn.Linear modules; "" for none.
	PEFTExperts string
	// PEFTMamba: PEFT refuses LoRA on this model's modules named
	// out_proj or conv1d (its Mamba model types: falcon_h1, mamba,
	// mamba2, falcon_mamba, nemotron_h; peft/tuners/tuners_utils.py
	// _check_lora_target_modules_mamba at 0.21.2), so memsh refuses a
	// target reaching one, all-linear included.
	PEFTMamba bool
	// LogitScale divides the head's logits by it (Granite's
	// logits_scaling: logits = logits / self.config.logits_scaling in
	// GraniteForCausalLM.forward, models/granite/modeling_granite.py at
	// 5.25.0; 0 = none): a new tensor of the logits' size and dtype, the
	// lm_head output freed there; a division by a Python float saves
	// nothing (DivBackward0 keeps only the scalar). HyperCLOVAX multiplies
	// by its logits_scaling instead (HyperCLOVAXForCausalLM.forward,
	// models/hyperclovax/modular_hyperclovax.py at 5.25.0), the same new
	// tensor, MulBackward0 keeping only the scalar: lowered as this
	// division.
	LogitScale float64
}

// Params is the exact parameter count: tied weights once, buffers never.
func (m *Model) Params() int64 {
	var n int64
	for _, l := range m.Layers {
		n += l.Params()
	}
	if m.Vocab > 0 {
		if !m.Tied() {
			n += m.outDim() * m.Vocab
		}
		if m.HeadBias {
			n += m.Vocab
		}
	}
	return n
}

// Head is the output layer's module path (HeadName, else lm_head).
func (m *Model) Head() string { return headPath(m.HeadName) }

func headPath(name string) string {
	if name == "" {
		return "lm_head"
	}
	return name
}

func (m *Model) Tied() bool { return m.TieEmbeddings && m.firstEmbedding() != nil }

func (m *Model) firstEmbedding() TokenLookup {
	var found TokenLookup
	for _, l := range m.Layers {
		Walk(l, "", func(_ string, x Layer) {
			if e, ok := x.(TokenLookup); ok && found == nil {
				found = e
			}
		})
		if found != nil {
			break
		}
	}
	return found
}

// outDim is the width of the last layer's output.
func (m *Model) outDim() int64 {
	for i := len(m.Layers) - 1; i >= 0; i-- {
		if d := WidthOut(m.Layers[i]); d > 0 {
			return d
		}
	}
	return 0
}

// widthOut is the output feature count of a layer, 0 when it keeps its input's.
func WidthOut(l Layer) int64 {
	switch x := l.(type) {
	case *Sequential:
		for i := len(x.Layers) - 1; i >= 0; i-- {
			if d := WidthOut(x.Layers[i]); d > 0 {
				return d
			}
		}
	case *Repeat:
		if x.Count() <= 0 {
			return 0
		}
		return WidthOut(x.Block(x.Count() - 1))
	case *Residual:
		return WidthOut(x.Layer)
	case interface{ OutDim() int64 }:
		return x.OutDim()
	}
	return 0
}

// widthIn is the input feature count of a layer, 0 when unknown.
func WidthIn(l Layer) int64 {
	switch x := l.(type) {
	case *Sequential:
		for _, c := range x.Layers {
			if d := WidthIn(c); d > 0 {
				return d
			}
		}
	case *Repeat:
		if x.Count() <= 0 {
			return 0
		}
		return WidthIn(x.Block(0))
	case *Residual:
		return WidthIn(x.Layer)
	case interface{ InDim() int64 }:
		return x.InDim()
	}
	return 0
}

func startsWithEmbedding(ls []Layer) bool {
	for len(ls) > 0 {
		switch x := ls[0].(type) {
		case TokenLookup:
			return true
		case *Sequential:
			ls = x.Layers
			continue
		}
		return false
	}
	return false
}

// Validate checks every layer and the head.
func (m *Model) Validate() error {
	if len(m.Layers) == 0 {
		return &units.Error{Path: m.Name, Msg: "model has no layers", Hint: "model(name, embedding(...), repeat(block, n), ...)"}
	}
	for _, l := range m.Layers {
		if err := l.Validate(ChildPath("", nil, l)); err != nil {
			return err
		}
	}
	switch m.Loss {
	case "cross_entropy", FlashCE, "mse", "none", "", "crps":
	default:
		return units.Errorf(m.Name, "unknown loss %q (known: cross_entropy, flash_cross_entropy, mse, none)", m.Loss)
	}
	if m.Vocab < 0 {
		return units.Errorf(m.Name, "vocab must be positive (got %d)", m.Vocab)
	}
	if err := CheckVocab(m.Name, "vocab", m.Vocab); err != nil {
		return err
	}
	if !(m.LogitSoftcap >= 0) || math.IsInf(m.LogitSoftcap, 0) {
		return units.Errorf(m.Name, "logit_softcap must be a positive number, or 0 for none (got %g)", m.LogitSoftcap)
	}
	if m.LogitSoftcap > 0 && m.Vocab == 0 {
		return units.Errorf(m.Name, "logit_softcap needs vocab= (it caps the output head's logits)")
	}
	if !(m.LogitScale >= 0) || math.IsInf(m.LogitScale, 0) {
		return units.Errorf(m.Name, "logit_scale must be a positive number, or 0 for none (got %g)", m.LogitScale)
	}
	if !startsWithEmbedding(m.Layers) && m.inputDim() <= 0 {
		return &units.Error{Path: m.Name, Msg: "cannot tell the input width of the first layer", Hint: "pass input_dim= to model()"}
	}
	return nil
}

func (m *Model) inputDim() int64 {
	if m.InputDim > 0 {
		return m.InputDim
	}
	return WidthIn(m.Layers[0])
}

// lower emits the model's forward for one micro-batch and returns the loss.
func (m *Model) lower(b *Builder) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = loweringError(r)
		}
	}()
	var x Value
	if startsWithEmbedding(m.Layers) {
		x = b.input("input_ids", []int64{b.Batch, b.Seq}, units.INT64)
		b.P.Input = x
		b.inputGrad = b.Ckpt.InputGrad && !b.Eval
	} else {
		dt := b.Prec.Compute
		if b.Prec.Autocast {
			dt = b.Prec.Params // autocast leaves the batch in its own dtype
		}
		shape := []int64{b.Batch, b.Seq / b.Par.spDiv(), m.inputDim()}
		if m.Data != nil {
			x = m.Data.lowerInput(b, shape, dt) // sets the program input
		} else {
			x = b.input("inputs", shape, dt)
			b.Val(x).Grad = m.InputGrad && !b.Eval
			b.P.Input = x
		}
	}
	if m.Data != nil {
		b.P.Loss = b.lowerRollout(m, x, b.rollout) // anemoi's rollout loop
		return nil
	}
	if b.gen.completion > 0 { // GRPO's generation phase, transformers' generate (generation.go)
		b.P.Loss = b.lowerGeneration(m, x)
		return nil
	}
	if b.pref.GRPO() { // GRPO: the policy and the loss (grpo.go)
		b.P.Loss = b.grpoLoss(m, x)
		return nil
	}
	if b.pref.KTO() { // KTO: the KL forwards, the policy, the reference, the loss (kto.go)
		b.P.Loss = b.ktoLoss(m, x)
		return nil
	}
	if b.pref != nil { // DPO: the policy, the reference, the loss (dpo.go)
		before := b.referenceBefore(m) // torchtune's LoRA recipes: the micro-batch before's reference logits
		b.P.Loss = b.dpoLoss(m, x, m.lowerBody(b, x), before)
		return nil
	}
	b.logitsBefore(m)
	batch := b.loadMegatronBatch(true, true)
	x = b.lowerMembers(m, x) // lowerBody once, or once per member
	b.P.Loss = b.megatronLossFunc(b.loss(m, x), batch)
	b.dropMegatronBatch(batch)
	return nil
}

// lowerBody emits the layers and the output head for input x.
func (m *Model) lowerBody(b *Builder, x Value) Value {
	first := len(b.P.Params)
	b.bodyFirst = first
	b.embedOut = NoValue
	for _, l := range m.Layers {
		x = b.LowerChild(l, x)
	}
	if m.HoldsEmbedding && b.embedOut != NoValue {
		b.KeepAlive("inputs_embeds", b.embedOut)
	}
	if m.Vocab > 0 {
		b.refuseQATHead(m)      // a swapped head under a chunked or fused loss (qat.go)
		if b.pref.FusedHead() { // TRL's fused LM head (trl_fused_head.go) runs in the loss
			return x
		}
		if b.Ft.chunkHead(m) { // loss_chunks, returns the loss
			return b.chunkedModelLoss(m, x)
		}
		if b.Ft.ligerHead(m) { // loss_chunks="liger", returns the loss
			return b.ligerModelLoss(m, x)
		}
		if b.Ft.titanHead(m) { // loss_chunks=("torchtitan", n), returns the loss
			return b.titanModelLoss(m, x)
		}
		if b.Ft.cceHead(m) { // loss_chunks="cce", returns the loss
			return b.cceModelLoss(m, x)
		}
		if b.Ft.trlHead(m) { // loss_chunks="trl", returns the loss
			return b.trlModelLoss(m, x)
		}
		if b.pref.GRPO() { // GRPOTrainer's logits path: the last completion+1 positions (grpo_logits.go)
			x = b.logitsToKeep(x, b.pref.GRPOConfig.Completion+1)
		}
		if b.gen.completion > 0 { // generate's logits_to_keep = 1 (generation.go)
			x = b.logitsToKeep(x, 1)
		}
		nParams := len(b.P.Params)
		b.tiedHead = b.embedWeight(m)
		x = b.headLinear(m, x) // vocab-parallel with TP
		b.tiedHead = -1
		for pi := first; pi < nParams; pi++ { // an MTP module's head shares the output head (nn.MTP)
			if b.P.Params[pi].Role == RoleLMHead && b.P.Params[pi].TiedTo < 0 {
				b.P.Params[pi].TiedTo = int32(nParams)
			}
		}
		if m.LogitScale > 0 {
			x = b.scaleLogits(x)
		}
		if m.LogitSoftcap > 0 {
			x = b.Softcap("logit_softcap", x)
		}
		if m.ForwardUpcast && m.LogitsFP32 && !b.Par.megatronCE && !b.Par.torchCE { // the model's output holds them in fp32
			x = b.Cast(x, units.FP32, "logits upcast to fp32 in the model's forward (transformers before 4.46)")
		}
		if b.Ft != nil && b.Ft.keepLogitsNext {
			b.P.Held = append(b.P.Held, x) // the loop's output, to the next forward's return
			b.Val(x).Why = "logits, held by the training loop's output through the backward and the optimizer step (keep_logits=\"next\")"
		} else if b.Ft != nil && b.Ft.keepLogits {
			b.P.HeldBackward = append(b.P.HeldBackward, x) // the loop's out.logits
			b.Val(x).Why = "logits, held by the training loop's output through the backward (keep_logits)"
		}
	}
	return x
}

// scaleLogits divides the logits x by Model.LogitScale.
func (b *Builder) scaleLogits(x Value) Value {
	return b.Ew("div", "logits_scaling", []Value{x}, b.Shape(x), b.Dtype(x), "logits / logits_scaling")
}

// RebindEmbeddingOutput is called with x's replacement y when the
// forward rebinds the local that holds the token embedding's output x
// (Granite: inputs_embeds = inputs_embeds * embedding_multiplier), so
// that Model.HoldsEmbedding keeps y and x dies after its last use.
func (b *Builder) RebindEmbeddingOutput(x, y Value) {
	if b.embedOut == x {
		b.embedOut = y
	}
}

// EmbeddingOutput is called by a token lookup on its output y: with
// Checkpoint.InputGrad the first one's output requires grad
// (enable_input_require_grads); the first one's output is what
// Model.HoldsEmbedding keeps.
func (b *Builder) EmbeddingOutput(y Value) {
	if b.embedOut == NoValue { // the first lookup's: Model.HoldsEmbedding
		b.embedOut = y
	}
	if b.inputGrad {
		b.Val(y).Grad = true
		b.inputGrad = false
	}
}

// input adds the program input (data: no grad).
func (b *Builder) input(name string, shape []int64, dt units.DType) Value {
	b.P.Values = append(b.P.Values, ValueInfo{
		Name: name, Shape: shape, Dtype: dt, Bytes: dt.Bytes(Numel(shape)),
		Cat: CatActivations, Producer: -1, Why: "input batch",
	})
	return Value(len(b.P.Values) - 1)
}

// loss lowers the loss. Cross-entropy: logits optionally upcast to fp32
// (a copy), log_softmax saved for backward (oracle REPORT.md section 4: the
// logits themselves are not kept); backward holds the saved log-probs, the
// dense nll gradient and the logits gradient at once.
func (b *Builder) loss(m *Model, x Value) Value {
	if b.Ft.chunkHead(m) || b.Ft.ligerHead(m) || b.Ft.titanHead(m) || b.Ft.cceHead(m) || b.Ft.trlHead(m) { // x is the loss already
		return x
	}
	defer b.Scope("loss")()
	switch m.Loss {
	case "", "cross_entropy":
		return b.crossEntropy(x, m.LogitsFP32, b.lossShift(m))
	case FlashCE:
		if m.LogitsFP32 {
			x = b.Cast(x, units.FP32, "logits upcast to fp32 for the loss")
		}
		return b.flashCrossEntropy(x)
	case "crps":
		return b.crpsLoss(x)
	case "mse":
		i := b.AddOp("mse_loss", "mse", []Value{x})
		loss := b.Out(i, "loss", nil, units.FP32, "loss")
		b.Save(i, x)
		return loss
	default:
		i := b.AddOp("sum", "sum", []Value{x})
		return b.Out(i, "loss", nil, units.FP32, "loss")
	}
}

// shiftLogits is logits[..., :-1, :].contiguous(): a copy of all but the
// last position (Model.ShiftLogits). Nothing is saved; its backward
// (CloneBackward0, then SliceBackward0: zeros of the input's size with
// the gradient copied in) returns a gradient of the whole logits' size.
func (b *Builder) shiftLogits(x Value) Value {
	shape := append([]int64(nil), b.Shape(x)...)
	if len(shape) < 2 || shape[len(shape)-2] < 2 {
		return x
	}
	shape[len(shape)-2]--
	i := b.AddOp("contiguous", "shift_logits", []Value{x})
	y := b.Out(i, "shift_logits", shape, b.Dtype(x), "logits[..., :-1, :].contiguous() for the loss (transformers before 4.49)")
	b.Op(i).Bytes += float64(2 * b.Val(y).Bytes)
	return y
}

// CrossEntropy lowers the cross-entropy of logits x, upcast to fp32 first
// when fp32 (the model's forward's logits.float()) or under autocast
// (which runs cross-entropy in fp32), vocabulary-parallel with TP
// (Megatron's, or torch's loss_parallel() with parallel(loss_parallel=
// "torch"), always eager); with compile=True the loss function is a graph
// of its own.
func (b *Builder) CrossEntropy(x Value, fp32 bool) Value { return b.crossEntropy(x, fp32, noShift) }

// crossEntropy is CrossEntropy, its targets shifted as shift says
// (lossShift, loss_labels.go: the plain path only): under shiftCopies on
// all but the last position of x, copied in the loss's graph after the
// upcast, as transformers' loss does.
func (b *Builder) crossEntropy(x Value, fp32 bool, shift labelShift) Value {
	if b.Par.megatronCE {
		return b.vocabParallelCE(x)
	}
	if fp32 {
		x = b.Cast(x, units.FP32, "logits upcast to fp32 for the loss")
	}
	if b.Par.torchCE { // eager: DTensor's handlers, never compiled
		if b.Prec.Autocast && b.Dtype(x) != units.FP32 {
			x = b.Cast(x, units.FP32, "logits upcast to fp32 for the loss")
		}
		return b.torchLossParallel(x)
	}
	defer b.LossGraph("cross_entropy")()
	if b.Prec.Autocast && b.Dtype(x) != units.FP32 {
		x = b.Cast(x, units.FP32, "logits upcast to fp32 for the loss")
	}
	lab, local := b.shiftedLabels(x, shift)
	if shift == shiftCopies {
		x = b.shiftLogits(x)
	}
	i := b.AddOp("cross_entropy", "cross_entropy", []Value{x, lab})
	lsm := b.Out(i, "log_probs", b.Shape(x), b.Dtype(x), "log_softmax of the logits (saved by cross-entropy)")
	b.Val(lsm).Grad = false
	tw := b.totalWeight(i, "total_weight", b.Dtype(x))
	loss := b.Out(i, "loss", nil, units.FP32, "loss")
	b.Save(i, lsm, lab, tw)  // targets.reshape(-1): a view of the labels
	b.SaveSoftmaxInput(i, x) // log_softmax's input, torch <= 1.10
	b.Op(i).WorkB = b.Val(lsm).Bytes
	b.Op(i).Flops = 5 * float64(Numel(b.Shape(x)))
	if local != NoValue {
		b.Release("labels", []Value{local}) // the loss function's local, freed when it returns
	}
	return loss
}

// Labels is the batch's targets for a loss over x ([.., tokens, vocab]
// logits or [.., tokens, hidden] head input): [.., tokens] int64, one per
// row. The caller loads them with the input and holds them for the step
// (Program.Labels, made once); a pipeline stage loads one micro-batch's
// when its loss runs. Cross-entropy saves them for nll_loss's backward
// (derivatives.yaml, nll_loss_forward: target).
func (b *Builder) Labels(x Value) Value {
	s := b.Shape(x)
	shape := append([]int64(nil), s[:len(s)-1]...)
	if b.P.Stage != nil {
		i := b.AddOp("batch", "labels", nil)
		v := b.Out(i, "labels", shape, units.INT64, "micro-batch of labels")
		b.Val(v).Grad = false
		return v
	}
	if b.P.Labels == NoValue {
		b.P.Labels = b.input("labels", shape, units.INT64)
		b.Val(b.P.Labels).Why = "labels of the batch"
	}
	return b.P.Labels
}

// totalWeight is nll_loss's second output, a 0-dim tensor in the log
// probabilities' dtype that its backward divides by (saved; torch 2.15's
// torch/_decomp/decompositions.py, nll_loss_forward, lines 4834-4851).
func (b *Builder) totalWeight(i int32, name string, dt units.DType) Value {
	tw := b.Out(i, name, nil, dt, "nll_loss total_weight (0-dim, saved)")
	b.Val(tw).Grad = false
	return tw
}
