package core

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// Fine-tuning options of a plan, gathered for the lowering: weight
// quantization of the frozen base (quant.go), frozen modules (freeze.go),
// the chunked loss (chunked_loss.go) and sequence packing (packing.go).
// Offload and paging act on the replay instead (offload.go, replay/paging.go).
type Finetune struct {
	quant     string // nf4 | nf4-dq | int8, "" when none
	quantHead bool   // lm_head quantized too
	// quantExperts: 3-D expert weights stored 4-bit, dequantized on access
	// (quant_experts.go)
	quantExperts bool
	quantFrom    units.DType // dtype the weights were quantized from (what dequantize returns)
	freeze       []string
	trainable    []*regexp.Regexp // Plan.Trainable compiled (trainable.go); nil: every parameter may train
	// trainablePatterns are Plan.Trainable as written, for errors.
	trainablePatterns []string
	lossChunks        int64
	liger             *LigerCE // Liger's fused linear cross-entropy (liger.go)
	titan             int64    // torchtitan's ChunkedLossWrapper's num_chunks, 0 when not (titan_loss.go)
	ligerLayers       bool     // Liger's RMSNorm and SwiGLU kernels (liger_layers.go)
	packed            bool
	docTokens         int64           // Plan.DocTokens
	docs              []int64         // Plan.Docs
	keepLogits        bool            // the loop holds the logits through the backward (Plan.KeepLogits)
	keepLogitsNext    bool            // ... and through the optimizer step and the next forward (Plan.KeepLogitsNext)
	useCache          bool            // the forward fills a DynamicCache (Plan.UseCache, not under checkpointing)
	noAttnMask        bool            // the batch carries no attention_mask (Plan.NoAttentionMask)
	megatronMask      bool            // Megatron's dataloader's attention mask (Plan.DataloaderMask, megatron_batch.go)
	adapterDT         units.DType     // LoRA adapters' own dtype (Plan.AdapterDType), InvalidDType: the params dtype
	peftExperts       peftExpertNames // PEFT's MoE target conversion for the model (Model.PEFTExperts; lora_experts.go)
	peftMamba         bool            // PEFT refuses adapters on out_proj and conv1d (Model.PEFTMamba)
	cce               bool            // the head and loss as Cut Cross-Entropy (cce.go)
	trl               bool            // the head and loss as TRL's fused LM head (trl_sft.go)
	Unfreeze          int             // > 0 while lowering modules a recipe trains (adapter v2 norms)
}

// finetuneInto writes into ft what the lowering needs from the plan.
func (p *Plan) finetuneInto(ft *Finetune) {
	*ft = Finetune{
		quant:          p.Quant,
		quantHead:      p.QuantLMHead,
		quantExperts:   p.QuantExperts,
		quantFrom:      p.QuantFrom,
		freeze:         p.Freeze,
		lossChunks:     p.LossChunks,
		packed:         p.TokensPerBatch > 0,
		docTokens:      p.DocTokens,
		docs:           p.Docs,
		ligerLayers:    p.LigerKernels,
		keepLogits:     p.KeepLogits,
		keepLogitsNext: p.KeepLogits && p.KeepLogitsNext,
		useCache:       p.ForwardCache(),
		adapterDT:      p.AdapterDType(),
		noAttnMask:     p.NoAttentionMask || p.TokensPerBatch > 0, // a packed row comes with position_ids alone (packing.go)
		megatronMask:   p.megatronMask(),
	}
	if p.Model != nil {
		ft.peftExperts, ft.peftMamba = peftExpertTables[p.Model.PEFTExperts], p.Model.PEFTMamba
	}
	if lv, ok := LookupLiger(p.FusedLoss); ok {
		ft.liger = &lv
	}
	ft.cce = p.FusedLoss == CCELoss
	ft.trl = p.FusedLoss == TRLHead
	if p.FusedLoss == TitanLoss {
		ft.titan, ft.lossChunks = max(p.LossChunks, 1), 1
	}
	if ft.quantFrom == units.InvalidDType {
		ft.quantFrom = p.Precision.Compute
	}
	if len(p.Trainable) > 0 {
		ft.trainable, _ = compileTrainable(p.Trainable) // Validate compiled them
		ft.trainablePatterns = p.Trainable
	}
}

// validateFinetune checks the fine-tuning fields of a plan.
func (p *Plan) validateFinetune() error {
	if p.Quant != "" {
		if p.LoRA == nil && len(p.Freeze) == 0 && p.Phase != Eval {
			return &units.Error{Path: "train", Msg: fmt.Sprintf("quant=%q needs a frozen base: bitsandbytes quantized weights cannot be trained", p.Quant),
				Hint: "add lora=lora(...) or freeze=[...], or drop quant="}
		}
		if p.Quant == "int8" && p.Precision.Compute != units.FP16 && p.Model != nil && p.Model.NativeLoRA {
			// Lightning's BitsandbytesPrecision, which runs LitGPT's models,
			// refuses int8 with any other dtype
			// (plugins/precision/bitsandbytes.py); transformers' load_in_8bit
			// takes a bf16 model, whose inputs MatMul8bitLt casts to fp16.
			return &units.Error{Path: "train", Msg: fmt.Sprintf("quant=\"int8\" runs in fp16 under Lightning's BitsandbytesPrecision (got precision %q)", p.Precision.Name),
				Hint: `use precision="fp16" with int8, or quant="nf4"`}
		}
	}
	if p.QuantLMHead && p.Quant == "" {
		return &units.Error{Path: "train", Msg: "quant_lm_head=True needs quant=", Hint: `pass quant="nf4"`}
	}
	if p.QuantExperts && p.Quant != "nf4" && p.Quant != "nf4-dq" {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("quant_experts=True stores the 3-D experts in bitsandbytes' 4-bit nf4 (replace_parameter_4bit); quant is %q", p.Quant),
			Hint: `pass quant="nf4" or "nf4-dq" (Axolotl's 8-bit experts parametrization is not modelled)`}
	}
	switch p.QuantFrom {
	case units.InvalidDType, units.FP16, units.BF16, units.FP32:
	default:
		return &units.Error{Path: "train", Msg: fmt.Sprintf("quant_from must be fp16, bf16 or fp32 (got %s)", p.QuantFrom)}
	}
	for _, f := range p.Freeze {
		if strings.TrimSpace(f) == "" {
			return &units.Error{Path: "train", Msg: "freeze names must not be empty", Hint: `freeze=["embed", "layers.0"] names modules by path prefix, kind or role`}
		}
	}
	if p.LossChunks < 0 {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("loss_chunks must be positive (got %d)", p.LossChunks)}
	}
	if p.LossChunks > 1 && ((p.Parallel.Norm().TP > 1 && p.FusedLoss != TitanLoss) || (p.Members > 1 && p.MembersMode == "sequential")) {
		return &units.Error{Path: "train", Msg: "loss_chunks does not combine with tensor parallelism or sequential members yet"}
	}
	if p.KeepLogits && (p.LossChunks > 1 || p.FusedLoss != "") {
		return &units.Error{Path: "train", Msg: "keep_logits holds the logits tensor of the model's output, and loss_chunks makes none whole",
			Hint: "drop keep_logits: a chunked or fused loss's logits are the recipe's to keep"}
	}
	if par := p.Parallel.Norm(); p.KeepLogits && p.KeepLogitsNext && (par.TP > 1 || par.PP > 1 || par.CP > 1 || p.Members > 1 || p.Preference != nil) {
		return &units.Error{Path: "train", Msg: `keep_logits="next" is modelled for a language model's loop on data parallelism alone`,
			Hint: "keep_logits=True, or drop tp, pp, cp, members and preference"}
	}
	if p.KeepLogits && (p.Model == nil || p.Model.Vocab == 0) {
		return &units.Error{Path: "train", Msg: "keep_logits holds the logits of the model's output head, and this model has none",
			Hint: "drop keep_logits"}
	}
	if p.FusedLoss != "" && p.FusedLoss != TitanLoss && p.LossChunks > 1 {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("loss_chunks is either a number of chunks or %q, not both", p.FusedLoss)}
	}
	if err := p.validateLiger(); err != nil {
		return err
	}
	if err := p.validateTrainable(); err != nil {
		return err
	}
	if err := p.validateKbit(); err != nil {
		return err
	}
	if p.TokensPerBatch < 0 {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("tokens_per_batch must be positive (got %d)", p.TokensPerBatch)}
	}
	if p.TokensPerBatch > 0 && p.Seq > p.TokensPerBatch {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("tokens_per_batch must hold at least one sequence of seq tokens (got tokens_per_batch=%d, seq=%d)", p.TokensPerBatch, p.Seq)}
	}
	if err := p.validatePacking(); err != nil {
		return err
	}
	if err := p.validateDataloaderMask(); err != nil {
		return err
	}
	if p.HostMemory < 0 {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("host_memory must be positive (got %d)", p.HostMemory)}
	}
	if p.Offload != nil {
		if err := p.Offload.Validate(); err != nil {
			return &units.Error{Path: "train", Msg: err.Error()}
		}
	}
	return nil
}

// configureFinetune hands the lowering its fine-tuning options; packed
// plans lower one row of TokensPerBatch tokens (packing.go).
func (p *Plan) configureFinetune(b *Builder) {
	p.finetuneInto(&b.ft)
	b.Ft = &b.ft
	if p.TokensPerBatch > 0 {
		b.Batch, b.Seq = 1, p.TokensPerBatch
	}
}

// UseCache reports whether the forward fills transformers' DynamicCache
// (Plan.UseCache; off under checkpointing, as transformers turns it off).
func (b *Builder) UseCache() bool { return b.Ft != nil && b.Ft.useCache }

// NoAttentionMask reports whether the batch carries no attention_mask
// (Plan.NoAttentionMask): transformers' masks then need not read the sample.
func (b *Builder) NoAttentionMask() bool { return b.Ft != nil && b.Ft.noAttnMask }

// HoldOutput marks vals as held by the model's output: through the
// backward when the loop keeps it (Plan.KeepLogits), else to the end of
// the forward (Program.HeldForward).
func (b *Builder) HoldOutput(vals ...Value) {
	if b.Ft != nil && b.Ft.keepLogits {
		b.P.HeldBackward = append(b.P.HeldBackward, vals...)
		return
	}
	b.P.HeldForward = append(b.P.HeldForward, vals...)
}

// logitsBefore is, under keep_logits="next", the micro-batch before's
// logits ([batch, seq, vocab], fp32 when the forward upcasts them, else
// in the compute dtype), which the loop's output holds until this
// micro-batch's forward returns: made before the forward, dropped at its
// end (Program.HeldForward), as the steady step finds them.
func (b *Builder) logitsBefore(m *Model) {
	if b.Ft == nil || !b.Ft.keepLogitsNext || m.Vocab <= 0 {
		return
	}
	dt := b.Prec.Compute
	if m.ForwardUpcast && m.LogitsFP32 {
		dt = units.FP32
	}
	i := b.AddOp("held", "logits_before", nil)
	b.Op(i).NoGradB = true
	v := b.Out(i, "logits_before", []int64{b.Batch, b.Seq, m.Vocab}, dt,
		"the micro-batch before's logits, which the loop's output holds until this micro-batch's forward returns (keep_logits=\"next\")")
	b.Val(v).Grad = false
	b.P.HeldForward = append(b.P.HeldForward, v)
}
