package importers

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"go.starlark.net/starlark"
)

// TestAxolotlResizeTo32x: resize_token_embeddings_to_32x pads GPT-2's
// 50,257-token vocabulary to 50,272 (ceil(50257 / 32) x 32, Axolotl's
// _resize_token_embeddings): the tied embedding gains 15 rows of
// n_embd, and the logits are 50,272 wide, so the step's peak grows; a
// vocabulary that is a multiple of 32 already is left as it is.
func TestAxolotlResizeTo32x(t *testing.T) {
	const base = "base_model: openai-community/gpt2\nmicro_batch_size: 4\ngradient_accumulation_steps: 1\nsequence_len: 1024\n" +
		"bf16: true\nattn_implementation: flash_attention_2\ndatasets:\n  - path: x\n    type: alpaca\n"
	model := map[string]string{"gpt2.json": "../../sim/testdata/hf/gpt2.json"}
	o := defaults(Options{Model: "gpt2.json"})
	var err error
	if o.ModelData, err = os.ReadFile(filepath.Join("testdata", model["gpt2.json"])); err != nil {
		t.Fatal(err)
	}
	run := func(config string) (vocab, params, peak int64, script string) {
		t.Helper()
		res, err := Import("r.yml", []byte(config), o)
		if err != nil {
			t.Fatal(err)
		}
		g := runScript(t, "imported.star", res.Script+"\n_r = simulate(plan)\n_v, _n, _p = plan.model.vocab, plan.model.params, _r.peak_allocated\n", model)
		for name, to := range map[string]*int64{"_v": &vocab, "_n": &params, "_p": &peak} {
			if err := starlark.AsInt(g[name], to); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		return vocab, params, peak, res.Script
	}
	v0, n0, p0, _ := run(base)
	v1, n1, p1, script := run(base + "resize_token_embeddings_to_32x: true\n")
	if v0 != 50257 || v1 != 50272 {
		t.Fatalf("vocab %d, resized %d: want 50257 and 50272\n%s", v0, v1, script)
	}
	if n1-n0 != 15*768 { // gpt2.json's n_embd
		t.Errorf("params %d -> %d: +%d, want 15 tied rows of 768 (+%d)", n0, n1, n1-n0, 15*768)
	}
	if p1 <= p0 {
		t.Errorf("peak allocated %d -> %d: the wider logits should raise it", p0, p1)
	}
	if !strings.Contains(script, "vocab_multiple = 32") {
		t.Errorf("no vocab_multiple in\n%s", script)
	}
	// false, or absent: config.json's vocabulary
	if v, _, _, _ := run(base + "resize_token_embeddings_to_32x: false\n"); v != 50257 {
		t.Errorf("resize_token_embeddings_to_32x: false: vocab %d, want 50257", v)
	}
}

// TestZooVocabMultiple: the zoo models the Hugging Face importers map Hub
// names to (hfModels) have vocabularies that are multiples of 32, so
// resize_token_embeddings_to_32x changes none of them and the importer
// writes nothing for them (hfModel).
func TestZooVocabMultiple(t *testing.T) {
	seen := map[string]bool{}
	var calls []string
	for _, m := range hfModels {
		c := fmt.Sprintf("%s(%q)", m.fn, m.size)
		if !seen[c] {
			seen[c] = true
			calls = append(calls, c)
		}
	}
	sort.Strings(calls)
	fns := map[string]bool{}
	for _, m := range hfModels {
		fns[m.fn] = true
	}
	var names []string
	for f := range fns {
		names = append(names, fmt.Sprintf("%q", f))
	}
	sort.Strings(names)
	src := fmt.Sprintf("load(\"@stdlib//llm.star\", %s)\n_v = [(c, m.vocab) for c, m in [%s]]\n", strings.Join(names, ", "), zooPairs(calls))
	g := runScript(t, "zoo.star", src, nil)
	list, _ := g["_v"].(*starlark.List)
	if list == nil || list.Len() != len(calls) {
		t.Fatalf("%d zoo models read, want %d", list.Len(), len(calls))
	}
	for i := range list.Len() {
		pair := list.Index(i).(starlark.Tuple)
		v, _ := starlark.AsInt32(pair[1])
		if v <= 0 || v%axolotlVocabMultiple != 0 {
			t.Errorf("%s: vocab %d is not a multiple of %d", pair[0], v, axolotlVocabMultiple)
		}
	}
}

// zooPairs is calls as Starlark pairs of the call's text and its value.
func zooPairs(calls []string) string {
	p := make([]string, len(calls))
	for i, c := range calls {
		p[i] = fmt.Sprintf("(%q, %s)", c, c)
	}
	return strings.Join(p, ", ")
}
