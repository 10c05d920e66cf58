package importers

import (
	"fmt"
	"path"
	"strings"
)

// ms-swift reads its arguments from a YAML or JSON file too: `swift sft
// sft.yaml [--more args]`, whose keys become --key value arguments before
// the command line's own (the command line's, later, win) and whose ENV
// mapping sets the variables the environment does not (swift/cli/main.py
// parse_yaml_args at v4.5.2). memsh reads such a file from the script
// (swiftConfigArgs), or the file itself (swiftConfigTrainer: memsh check
// sft.yaml), as ms-swift does.

// swiftConfigTrainer reads an ms-swift YAML or JSON config on its own,
// as `swift sft` reads it (a file with `model` and one of `tuner_type`,
// `train_type`, `rlhf_type`; or --trainer swift): its ENV's
// NPROC_PER_NODE, else --gpus, processes a node.
var swiftConfigTrainer = &trainer{
	name:     "swift",
	about:    "ms-swift's YAML or JSON config (swift sft sft.yaml), read as the command line's arguments are",
	exts:     []string{".yaml", ".yml", ".json"},
	parse:    parseSwiftConfig,
	modelKey: "model",
	detect: func(t *tree) bool {
		if _, ok := t.leaves["model"]; !ok {
			return false
		}
		for _, k := range []string{"tuner_type", "train_type", "rlhf_type"} {
			if _, ok := t.leaves[k]; ok {
				return true
			}
		}
		return false
	},
	plan:     swiftPlan,
	noEffect: swiftTrainer.noEffect,
}

// swiftConfigRunner marks a config file read on its own: no launcher
// says the processes, --gpus does (swiftWorld).
const swiftConfigRunner = "config"

// parseSwiftConfig reads an ms-swift config file into the tree the
// command line's reading makes, each key at its line.
func parseSwiftConfig(file string, data []byte) (*tree, error) {
	c, err := parseHF(file, data)
	if err != nil {
		return nil, err
	}
	t := newTree(file)
	cmd := "swift sft"
	if _, ok := c.leaves["rlhf_type"]; ok {
		cmd = "swift rlhf"
	}
	t.leaves[swiftCommandKey] = leaf{value: cmd}
	t.leaves[swiftRunnerKey] = leaf{value: swiftConfigRunner}
	for k, l := range c.leaves {
		if name, ok := strings.CutPrefix(k, "ENV."); ok {
			t.leaves["env."+name] = leaf{value: fmt.Sprint(l.value), line: l.line}
			continue
		}
		t.leaves[k] = l
	}
	return t, nil
}

// swiftConfigArgs merges the config file a script's command names
// (`swift sft sft.yaml`), read by readFile from the script's folder, into
// t: its keys where the command line does not give them, its ENV where
// the environment does not, at the command's line.
func swiftConfigArgs(t *tree, name string, line int, readFile func(string) ([]byte, error)) error {
	hint := "memsh reads the file the command names from the script's folder (" + name + "); or check the file itself: memsh check " + path.Base(name)
	if readFile == nil {
		return &Error{File: t.file, Line: line, Msg: "the command reads its arguments from " + name + ", and no file can be read here", Hint: hint}
	}
	data, err := readFile(name)
	if err != nil {
		return &Error{File: t.file, Line: line, Msg: fmt.Sprintf("cannot read %s, the command's arguments: %v", name, err), Hint: hint}
	}
	c, err := parseSwiftConfig(name, data)
	if err != nil {
		return err
	}
	for k, l := range c.leaves {
		if k == swiftCommandKey || k == swiftRunnerKey {
			continue
		}
		if _, set := t.leaves[k]; !set {
			t.leaves[k] = leaf{value: l.value, line: line}
		}
	}
	return nil
}
