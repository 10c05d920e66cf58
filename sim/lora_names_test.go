package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// peftTargets is one line of testdata/peft_targets.jsonl: what PEFT's
// get_peft_model(model, LoraConfig(r=4, lora_alpha=8,
// target_modules=Targets)) adapts in a tiny transformers model
// (tools/oracle/peft_targets.py: peft 0.21.2, transformers 5.25.0, torch
// 2.15.0, on the meta device). Targets is a list of module names,
// "all-linear", or null for PEFT's default for the model type, which
// Resolved names.
type peftTargets struct {
	Config, Arch string
	Targets      any
	Resolved     []string
	Trainable    int64
	Adapted      []string // the adapted modules' paths
}

func (c *peftTargets) targets() []string {
	switch t := c.Targets.(type) {
	case string:
		return []string{t}
	case []any:
		out := make([]string, len(t))
		for i, s := range t {
			out[i], _ = s.(string)
		}
		return out
	}
	return c.Resolved // PEFT's default for the model type
}

// TestLoRATargetsAsPEFT holds lora(targets=) given module names (and
// all-linear, and PEFT's defaults: BERT's, RoBERTa's and XLM-RoBERTa's
// query and value, GPT-2's c_attn, DeBERTa-v2's query_proj and
// value_proj) to what PEFT adapts on the same tiny models: the same
// modules, the same trainable parameter count. A target reaching a
// pooler's dense (BERT's pooler, RoBERTa's classifier.dense, DeBERTa's
// ContextPooler), whose adapter memsh does not model, is refused with
// the pooler's path, and PEFT does adapt one there.
func TestLoRATargetsAsPEFT(t *testing.T) {
	cases := readJSONL[peftTargets](t, "peft_targets.jsonl")
	if len(cases) < 60 {
		t.Fatalf("%d cases in testdata/peft_targets.jsonl, want the 62 peft_targets.py writes", len(cases))
	}
	refused := 0
	for _, c := range cases {
		targets := c.targets()
		name := c.Arch + " " + strings.Join(targets, ",")
		m, err := hf.FromConfigOptions(readHF(t, c.Config), hf.Options{Attn: "sdpa", Arch: c.Arch})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		prog, err := loraProgram(t, name, m, targets, nil)
		if err != nil {
			pooler := slices.ContainsFunc(c.Adapted, func(m string) bool {
				return strings.HasSuffix(m, "pooler.dense") || m == "classifier.dense"
			})
			if !strings.Contains(err.Error(), "pooler's dense is not modelled") || !pooler {
				t.Errorf("%s: %v (PEFT adapts %v)", name, err, c.Adapted)
			}
			refused++
			continue
		}
		trainable, adapted := loraAdapted(prog)
		if !slices.Equal(adapted, c.Adapted) {
			t.Errorf("%s: memsh adapts %v, PEFT %v", name, adapted, c.Adapted)
		}
		if trainable != c.Trainable {
			t.Errorf("%s: %d trainable parameters, PEFT %d", name, trainable, c.Trainable)
		}
	}
	if refused == 0 {
		t.Error("no case reached a pooler: the refusal is untested")
	}
}

// loraAdapted is prog's trainable parameter count and the module paths
// of its LoRA adapters (each lora_A's module), sorted.
func loraAdapted(prog *core.Program) (int64, []string) {
	var trainable int64
	var adapted []string
	for _, q := range prog.Params {
		if q.TiedTo >= 0 {
			continue // another name for a tensor counted once (a module called again: HRM-Text's stacks)
		}
		if q.Trainable {
			trainable += q.FullNumel
		}
		if m, ok := strings.CutSuffix(q.Name, ".lora.lora_A.weight"); ok {
			adapted = append(adapted, m)
		}
	}
	slices.Sort(adapted)
	return trainable, adapted
}

// loraProgram lowers m in tinyPlan under lora(rank=4, alpha=8,
// targets=targets, target_parameters=params), the LoRA PEFT's oracles
// apply (peft_targets.py, peft_moe_targets.py).
func loraProgram(t *testing.T, name string, m *core.Model, targets, params []string) (*core.Program, error) {
	t.Helper()
	p := tinyPlan(t, m)
	p.LoRA = &core.LoRA{Rank: 4, Alpha: 8, Targets: targets, TargetParameters: params}
	if err := p.LoRA.Validate(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return p.LowerProgram()
}
