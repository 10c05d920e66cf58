package importers

import "fmt"

// torchtitanDictTrainer reads the resolved config torchtitan writes with
// debug.save_config_file (or logs with debug.print_config):
// Trainer.Config.to_dict() as JSON (trainer.py and config/configurable.py
// at b5bcd76c6), the second way into a Python config memsh cannot read.
// Every field is in it, defaults too; the keys are the Python reader's
// (torchtitanPyTrainer), and the plan is mapped the same way. to_dict
// keeps no class names: the activation checkpointing policy and the
// loss are told by their fields (MemoryBudgetAC's memory_budget,
// SelectiveAC's force_recompute_mm_shapes_by_fqns, FullAC's neither;
// ChunkedLossWrapper's num_chunks, CrossEntropyLoss's global_vocab_size),
// and the model's converters (Float8's Linear configs differ only in a
// private field to_dict drops) and attention backend are lost: listed as
// not modelled.
var torchtitanDictTrainer = &trainer{
	name:  "torchtitan",
	about: "a torchtitan Python config as debug.save_config_file writes it (Trainer.Config.to_dict(), JSON): what the Python configs map, less the converters and the attention backend",
	exts:  []string{".json"},
	parse: parseTorchtitanDict,
	detect: func(t *tree) bool {
		_, flavor := t.leaves["model_spec.flavor"]
		_, tokens := t.leaves["training.num_tokens_per_microbatch_per_dp_rank"]
		return flavor && tokens
	},
	plan:     torchtitanPyPlan,
	noEffect: append([]string{"model_spec.model.*", "activation_checkpoint.*", "loss.*", "optimizer.*"}, torchtitanPyTrainer.noEffect...),
}

// pyDictLost is what a to_dict() dump lacks, a field's stand-in value.
const pyDictLost = "not in Trainer.Config.to_dict()"

// parseTorchtitanDict reads the JSON and restores the leaves the Python
// reader writes for classes: activation_checkpoint, loss, loss.loss_fn,
// optimizer.param_groups.
func parseTorchtitanDict(file string, data []byte) (*tree, error) {
	t, err := parseJSON(file, data)
	if err != nil {
		return nil, err
	}
	if _, ok := t.leaves["model_spec.flavor"]; !ok {
		return t, nil // not torchtitan's: detect says so
	}
	ac := pyDictClass(t, "activation_checkpoint", []string{"memory_budget", "MemoryBudgetAC.Config"}, []string{"force_recompute_mm_shapes_by_fqns", "SelectiveAC.Config"},
		[]string{"preserve_rng_state", "FullAC.Config"})
	if ac != "" {
		t.leaves["activation_checkpoint"] = leaf{value: ac}
	}
	loss := pyDictClass(t, "loss", []string{"num_chunks", "ChunkedLossWrapper.Config"}, []string{"global_vocab_size", "CrossEntropyLoss.Config"})
	if loss == "" {
		loss = "a loss without fields (" + pyDictLost + ")"
	}
	t.leaves["loss"] = leaf{value: loss}
	if loss == "ChunkedLossWrapper.Config" {
		if inner := pyDictClass(t, "loss.loss_fn", []string{"global_vocab_size", "CrossEntropyLoss.Config"}); inner != "" {
			t.leaves["loss.loss_fn"] = leaf{value: inner}
		}
	}
	if v, ok := t.leaves["optimizer.param_groups"]; ok {
		groups, _ := v.value.([]any)
		classes := make([]any, 0, len(groups))
		for i, g := range groups {
			m, ok := g.(map[string]any)
			if !ok {
				return nil, &Error{File: file, Key: "optimizer.param_groups", Msg: fmt.Sprintf("want a list of parameter groups, got an item %s", describe(g))}
			}
			classes = append(classes, "ParamGroupConfig")
			for k, x := range m {
				t.leaves[fmt.Sprintf("optimizer.param_groups[%d].%s", i, k)] = leaf{value: x}
			}
		}
		t.leaves["optimizer.param_groups"] = leaf{value: classes}
	}
	t.leaves["model_spec.attn_backend"] = leaf{value: pyDictLost}
	t.notModelled = append(t.notModelled, "model_spec.converters: "+pyDictLost+" (a Float8 or MXFP8 model reads as bf16)")
	return t, nil
}

// pyDictClass tells a config's class by a field only that class has
// (pairs of field and class, tried in order); "None" for null, "" when
// the key is absent or no field matches.
func pyDictClass(t *tree, key string, byField ...[]string) string {
	if l, ok := t.leaves[key]; ok {
		if l.value == nil {
			return "None"
		}
		return ""
	}
	for _, f := range byField {
		if _, ok := t.leaves[key+"."+f[0]]; ok {
			return f[1]
		}
	}
	return ""
}
