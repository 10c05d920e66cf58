package importers

import (
	"fmt"
	"strings"
)

// hfCheckpoint is activation checkpointing as the trainer runs it under
// transformers 5 (hf_config's default release), with the
// torch.utils.checkpoint variant it asks for:
//   - activation_checkpointing and activation_checkpointing_kwargs
//     (transformers 5.23.0 and later), or their deprecated aliases
//     gradient_checkpointing and gradient_checkpointing_kwargs, which
//     TrainingArguments reads when the new names are unset
//     (training_args.py at 5.25.0);
//   - use_reentrant when the kwargs say it;
//   - otherwise non-reentrant: the plain Trainer's
//     activation_checkpointing_enable() asks for {"use_reentrant": False}
//     when no kwargs are given (modeling_utils.py from 5.0.0; 4.x's
//     gradient_checkpointing_enable() asked for True, 4.57.1 l.3691-3692:
//     memsh.transformers=4.x says so, as does
//     gradient_checkpointing_kwargs.use_reentrant=true),
//     and TRL's SFTTrainer, which set it so itself under transformers < 5
//     (trl/trainer/sft_trainer.py at v1.16.0, l.1075-1081); but reentrant
//     for a PEFT model under DeepSpeed ZeRO-3, whatever the config says
//     (l.872-895, trl#2514);
//   - every_n_layers in the kwargs (5.17.0 and later): one layer in n
//     checkpointed, checkpoint(every=n); offload (save_on_cpu around each
//     checkpoint) is not modelled.
//
// A PEFT model's embedding output requires grad (TRL calls
// enable_input_require_grads() with gradient checkpointing, l.898-900;
// transformers 5 does so for every model taking input_ids, which changes
// nothing for a trainable embedding).
func hfCheckpoint(t *tree, p *plan, ds *tree, run hfRun) error {
	name, kwargs := "gradient_checkpointing", "gradient_checkpointing_kwargs"
	if v, ok := t.leaves["activation_checkpointing"]; ok && v.value != nil {
		name = "activation_checkpointing"
	}
	for k := range t.leaves {
		if strings.HasPrefix(k, "activation_checkpointing_kwargs.") {
			kwargs = "activation_checkpointing_kwargs"
		}
	}
	for k := range t.leaves { // the aliases transformers ignores once the new names are set
		if (name != "gradient_checkpointing" && k == "gradient_checkpointing") ||
			(kwargs != "gradient_checkpointing_kwargs" && strings.HasPrefix(k, "gradient_checkpointing_kwargs.")) {
			t.get(k)
		}
	}
	_, set := t.leaves[name]
	sft := false
	for _, k := range []string{"max_length", "max_seq_length", "packing", "dataset_text_field", "use_peft"} {
		if _, ok := t.leaves[k]; ok {
			sft = true
		}
	}
	if sft && !set {
		return &Error{File: t.file, Key: name, Msg: "missing: TRL's SFTConfig and TrainingArguments default it differently",
			Hint: "say it: " + name + "=true (or false)"}
	}
	on, err := t.boolean(name, false)
	if err != nil {
		return err
	}
	p.keyOf(t, "checkpoint", name)
	peft, err := t.boolean("use_peft", false)
	if err != nil {
		return err
	}
	// enable_input_require_grads: PEFT's under checkpointing (TRL, the
	// Trainer), Axolotl's for every adapter and for unfrozen_parameters
	// naming the embeddings (hfRun.inputGrads)
	inputGrads := peft || run.inputGrads
	if !on {
		if run.inputGrads {
			p.set("checkpoint", call("checkpoint", str("none"), kw("input_requires_grad", "True")))
		}
		return nil
	}
	_, major, err := hfTransformers(t)
	if err != nil {
		return err
	}
	// 4.x's gradient_checkpointing_enable() asks for reentrant; TRL's
	// SFTTrainer asks for non-reentrant itself under 4.x
	reentrant, err := t.boolean(kwargs+".use_reentrant", major == 4 && !sft)
	if err != nil {
		return err
	}
	every, err := t.integer(kwargs+".every_n_layers", 1, 1, 1<<20)
	if err != nil {
		return err
	}
	if every > 1 {
		t.notModelled = append(t.notModelled, fmt.Sprintf("%s.every_n_layers: transformers checkpoints layers 0, %d, %d, ...; "+
			"checkpoint(every=%d) the same number of layers, from layer %d (the count is the same, which layers may differ by one at the ends)",
			kwargs, every, 2*every, every, every-1))
	}
	t.notModelledIf(kwargs+".offload", "the checkpointed layers' inputs held in pinned host memory (save_on_cpu): memsh keeps them on the device")
	if ds != nil && peft && run.zero3PEFTReentrant {
		stage, err := ds.integer("zero_optimization.stage", 0, 0, 3)
		if err != nil {
			return err
		}
		reentrant = reentrant || stage == 3
	}
	if !reentrant && !inputGrads && every == 1 {
		p.set("checkpoint", str("full"))
		return nil
	}
	args := []string{str("full")}
	if every > 1 {
		args = []string{kw("every", num(every))}
	}
	if reentrant {
		args = append(args, kw("reentrant", "True"))
	}
	if inputGrads {
		args = append(args, kw("input_requires_grad", "True"))
	}
	p.set("checkpoint", call("checkpoint", args...))
	return nil
}
