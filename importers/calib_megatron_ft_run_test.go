package importers

import (
	"context"
	"fmt"
	"github.com/memsh/memsh/lang"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/memsh/memsh/builtins/plans"
	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/core"
	"go.yaml.in/yaml/v3"
)

// ftScript writes a functional test's model_config.yaml as the launch
// script Megatron-LM's CI runs (tests/functional_tests/shell_test_utils/
// _run_training.sh at d98e8a6, lines 76 and 131-166): ENV_VARS exported,
// MODEL_ARGS in order as pretrain_gpt.py's arguments, a true value as the
// bare flag, a list's items as the flag's values, any other value as is
// (quoted here, so that bash keeps the CI's ${...} placeholders as text);
// torchrun over GPUS_PER_NODE processes (8 unless ENV_VARS says).
func ftScript(data []byte) (script string, gpus int64, err error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return "", 0, err
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return "", 0, fmt.Errorf("not a mapping")
	}
	top := doc.Content[0]
	section := func(name string) *yaml.Node {
		for i := 0; i+1 < len(top.Content); i += 2 {
			if top.Content[i].Value == name {
				return top.Content[i+1]
			}
		}
		return nil
	}
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	var b strings.Builder
	b.WriteString("#!/bin/bash\n")
	gpus = 8
	if env := section("ENV_VARS"); env != nil {
		for i := 0; i+1 < len(env.Content); i += 2 {
			k, v := env.Content[i].Value, env.Content[i+1].Value
			fmt.Fprintf(&b, "export %s=%s\n", k, quote(v))
			if k == "GPUS_PER_NODE" {
				if _, err := fmt.Sscan(v, &gpus); err != nil {
					return "", 0, fmt.Errorf("GPUS_PER_NODE %q", v)
				}
			}
		}
	}
	args := section("MODEL_ARGS")
	if args == nil || args.Kind != yaml.MappingNode {
		return "", 0, fmt.Errorf("no MODEL_ARGS")
	}
	fmt.Fprintf(&b, "torchrun --nproc_per_node %d pretrain_gpt.py", gpus)
	for i := 0; i+1 < len(args.Content); i += 2 {
		k, v := args.Content[i].Value, args.Content[i+1]
		b.WriteString(" \\\n    " + k)
		switch {
		case v.Kind == yaml.SequenceNode:
			for _, e := range v.Content {
				b.WriteString(" " + quote(e.Value))
			}
		case v.Tag == "!!bool" && v.Value == "true":
		default:
			b.WriteString(" " + quote(v.Value))
		}
	}
	b.WriteString("\n")
	return b.String(), gpus, nil
}

// ftResult is what memsh says of one functional test's job: the refusal,
// or the last rank's figures (the rank Megatron's tensorboard writer sits
// on, global rank world_size - 1: the last pipeline stage).
type ftResult struct {
	refused      string
	unknown      []string
	notModelled  []string
	after, peak  int64 // allocated after the steady step, its peak
	step         float64
	stages       int
	script, plan string
}

// ftRun imports and replays one functional test.
func ftRun(t *testing.T, family, name string) ftResult {
	t.Helper()
	path := filepath.Join("testdata", "megatron", "functional", family, name+".yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	script, gpus, err := ftScript(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	res, err := Import(name+".sh", []byte(script), Options{GPU: "H100-80GB", GPUs: gpus, Nodes: 1})
	if err != nil {
		return ftResult{refused: err.Error(), script: script}
	}
	in := lang.New(lang.Options{Stdout: io.Discard, Files: fstest.MapFS{"imported.star": {Data: []byte(res.Script)}}})
	defer in.Close()
	g, err := in.RunFile(context.Background(), "imported.star")
	if err != nil {
		return ftResult{refused: err.Error(), script: res.Script}
	}
	p, ok := g["plan"].(*plans.Plan)
	if !ok {
		t.Fatalf("%s: the imported script has no plan:\n%s", name, res.Script)
	}
	r, err := sim.Evaluate(p.SimPlan(), core.Options{Timeline: true})
	if err != nil {
		return ftResult{refused: "evaluate: " + err.Error(), script: res.Script}
	}
	last := r
	if len(r.Ranks) > 0 {
		last = r.Ranks[len(r.Ranks)-1]
	}
	out := ftResult{unknown: res.Unknown, notModelled: res.NotModelled, peak: last.PeakAllocated, step: r.Time.StepSeconds,
		stages: max(1, len(r.Ranks)), script: res.Script, plan: p.String()}
	if tl := last.Timeline; len(tl) > 0 {
		out.after = tl[len(tl)-1].Allocated
	}
	return out
}
