package sim

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// TestDescribeModules holds model.describe()'s rows for every hf_config
// family with a vision or audio tower to the model's own tree: each path
// once (a language model a reader splits around the tower is one row),
// the top-level rows' parameters summing to the model's, and each module
// directly under the model (model.vision_tower, model.multi_modal_projector,
// model.language_model, lm_head; Llama 4's vision_model sits at the root)
// holding what transformers' named_parameters() holds under that prefix.
// A tied head is 0 rows' worth (transformers lists its weight once, under
// the embedding), so a missing lm_head figure must be a row of 0.
//
// The figures: nice -n 10 /work/venv-t/bin/python tools/oracle/hf_module_params.py CONFIG...
// (transformers 5.25.0, torch 2.15.0, on the meta device).
func TestDescribeModules(t *testing.T) {
	cases := []struct {
		config string
		hf     map[string]int64 // transformers' parameters under each top-level module; nil: not measured
	}{
		{"gemma3-vl-tiny.json", map[string]int64{"model.vision_tower": 26912, "model.multi_modal_projector": 2080, "model.language_model": 165056}},
		{"gemma4-av-tiny.json", map[string]int64{"model.vision_tower": 24384, "model.language_model": 707072, "model.audio_tower": 52148, "model.embed_vision": 4096, "model.embed_audio": 6144}},
		{"gemma4-vl-bidir-tiny.json", map[string]int64{"model.vision_tower": 24384, "model.language_model": 707072, "model.embed_vision": 4096}},
		{"gemma4-vl-std-tiny.json", map[string]int64{"model.vision_tower": 24384, "model.language_model": 707072, "model.embed_vision": 4096}},
		{"gemma4-vl-tiny.json", map[string]int64{"model.vision_tower": 24384, "model.language_model": 707072, "model.embed_vision": 4096}},
		{"idefics3-odd-tiny.json", map[string]int64{"model.vision_model": 23840, "model.connector": 8192, "model.text_model": 93248, "lm_head": 19200}},
		{"idefics3-tiny.json", map[string]int64{"model.vision_model": 23840, "model.connector": 8192, "model.text_model": 93248, "lm_head": 19200}},
		{"internvl-qknorm-tiny.json", map[string]int64{"model.vision_tower": 36512, "model.multi_modal_projector": 12672, "model.language_model": 139840, "lm_head": 65536}},
		{"internvl-rms-tiny.json", map[string]int64{"model.vision_tower": 36384, "model.multi_modal_projector": 12672, "model.language_model": 139840, "lm_head": 65536}},
		{"internvl-tiny.json", map[string]int64{"model.vision_tower": 36640, "model.multi_modal_projector": 12672, "model.language_model": 139840, "lm_head": 65536}},
		{"lfm2_vl-moe-tiny.json", map[string]int64{"model.vision_tower": 19232, "model.multi_modal_projector": 9584, "model.language_model": 198496}},
		{"lfm2_vl-nonorm-tiny.json", map[string]int64{"model.vision_tower": 20768, "model.multi_modal_projector": 9328, "model.language_model": 209760, "lm_head": 16384}},
		{"lfm2_vl-tiny.json", map[string]int64{"model.vision_tower": 19232, "model.multi_modal_projector": 9584, "model.language_model": 209760}},
		{"llama4-vision-tiny.json", map[string]int64{"vision_model": 53376, "multi_modal_projector": 3072, "language_model": 195648}},
		{"llava-next-tiny.json", map[string]int64{"model.image_newline": 64, "model.vision_tower": 45152, "model.multi_modal_projector": 6272, "model.language_model": 139584, "lm_head": 65536}},
		{"llava-onevision-tiny.json", map[string]int64{"model.image_newline": 64, "model.vision_tower": 45056, "model.multi_modal_projector": 6272, "model.language_model": 139840, "lm_head": 65536}},
		{"llava-pixtral-tiny.json", map[string]int64{"model.vision_tower": 39456, "model.multi_modal_projector": 6272, "model.language_model": 139584, "lm_head": 65536}},
		{"llava-tiny-last.json", map[string]int64{"model.vision_tower": 45152, "model.multi_modal_projector": 6272, "model.language_model": 139584, "lm_head": 65536}},
		{"llava-tiny.json", map[string]int64{"model.vision_tower": 45152, "model.multi_modal_projector": 6272, "model.language_model": 139584, "lm_head": 65536}},
		{"ministral3-vl-tiny.json", map[string]int64{"model.vision_tower": 39456, "model.multi_modal_projector": 10272, "model.language_model": 139584, "lm_head": 65536}},
		{"mllama-tiny.json", map[string]int64{"model.vision_model": 91911, "model.language_model": 164996, "model.multi_modal_projector": 6208, "lm_head": 16384}},
		{"qwen2-vl-tiny.json", map[string]int64{"model.visual": 79552, "model.language_model": 93504}},
		{"qwen2.5-vl-tiny.json", map[string]int64{"model.visual": 104800, "model.language_model": 93504}},
		{"qwen3-vl-moe-tiny.json", map[string]int64{"model.visual": 160288, "model.language_model": 130848}},
		{"qwen3-vl-tiny.json", map[string]int64{"model.visual": 160288, "model.language_model": 130336}},
		{"qwen3.5-vl-tiny.json", map[string]int64{"model.visual": 110240, "model.language_model": 186792}},
		{"smolvlm-tiny.json", map[string]int64{"model.vision_model": 25376, "model.connector": 32768, "model.text_model": 93248, "lm_head": 19200}},
		{"glm4v-tiny.json", map[string]int64{"model.visual": 90848, "model.language_model": 93760, "lm_head": 19200}},
		{"glm4v-moe-tiny.json", map[string]int64{"model.visual": 90848, "model.language_model": 99904, "lm_head": 19200}},
		{"kimi-k2.5-tiny.json", nil}, // trust_remote_code: no transformers class to count
	}
	for _, c := range cases {
		t.Run(c.config, func(t *testing.T) {
			opts := hf.Options{Attn: "sdpa"}
			if strings.HasPrefix(c.config, "lfm2_vl") {
				opts.Processor = lfm2VLProcessor("") // the tiny tower's patches
			}
			m, err := hf.FromConfigOptions(readHF(t, c.config), opts)
			if err != nil {
				t.Fatal(err)
			}
			seen := describeRows(t, m)
			for path, want := range c.hf {
				got, ok := seen[path]
				if !ok {
					t.Errorf("no row %s (transformers: %d parameters)", path, want)
				} else if got != want {
					t.Errorf("%s: %d parameters, transformers %d", path, got, want)
				}
			}
			if c.hf == nil {
				return
			}
			var under int64 // transformers' parameters under model.
			for path, n := range c.hf {
				if strings.HasPrefix(path, "model.") {
					under += n
				}
			}
			if got, ok := seen["model"]; ok && got != under {
				t.Errorf("model: %d parameters, transformers %d", got, under)
			}
			for path, got := range seen {
				if _, ok := c.hf[path]; !ok && got != 0 && isTopModule(path) {
					t.Errorf("%s: %d parameters, no such module in transformers' tree", path, got)
				}
			}
		})
	}
}

// isTopModule says whether path names a module directly under the root or
// under model: the depth the figures are summed at.
func isTopModule(path string) bool {
	first, rest, nested := strings.Cut(path, ".")
	return nested && first == "model" && !strings.Contains(rest, ".") || !nested && path != "model"
}

// TestDescribeEveryConfig holds describe() of every config under
// testdata/hf that hf_config reads without options to its two rules:
// each path once, the top-level rows summing to the model's parameters
// (a head's bias counted in its row; a head or layer whose path sits in
// another layer's module, RobertaClassificationHead's
// classifier.out_proj, counted in that module's row too).
func TestDescribeEveryConfig(t *testing.T) {
	for _, c := range hfConfigModels(t) {
		t.Run(c.file, func(t *testing.T) { describeRows(t, c.m) })
	}
}

// describeRows checks m.Describe()'s rules (each path once, the top-level
// rows summing to m.Params()) and gives each row's parameters by path.
func describeRows(t *testing.T, m *core.Model) map[string]int64 {
	t.Helper()
	seen := map[string]int64{}
	var top int64
	for _, r := range m.Describe() {
		if _, dup := seen[r.Path]; dup {
			t.Errorf("%s listed twice", r.Path)
		}
		seen[r.Path] = r.Params
		if !strings.Contains(r.Path, ".") {
			top += r.Params
		}
	}
	if top != m.Params() {
		t.Errorf("top-level rows sum to %d parameters, the model has %d", top, m.Params())
	}
	return seen
}

// TestDescribeAsTransformers holds every row of model.describe() to the
// parameters transformers keeps under that module (testdata/hf_names.jsonl:
// every class's named_parameters(), tools/oracle/hf_names.py), per block
// of a row's block range, and leaves no module unlisted: a parameter whose
// nearest listed module is a container (a sequential, a stack of blocks)
// sits in a module describe() does not show. MEMSH_HF_NAMES names the
// survey (hf_names.py --all) in the file's place. A tied tensor counts under
// each of its names outside the tied head, whose row lists it as 0.
func TestDescribeAsTransformers(t *testing.T) {
	processors := map[string][]byte{"lfm2_vl-tiny.json": lfm2VLProcessor(""), "lfm2_vl-nonorm-tiny.json": lfm2VLProcessor(""), "lfm2_vl-moe-tiny.json": lfm2VLProcessor("")}
	trees := readJSONL[hfTree](t, "hf_names.jsonl")
	if survey := os.Getenv("MEMSH_HF_NAMES"); survey != "" {
		trees = readJSONL[hfTree](t, survey) // as TestHFNamesAsTransformers reads it
	}
	for _, tr := range trees {
		m, err := hf.FromConfigOptions(readHF(t, tr.Config), hf.Options{Attn: "sdpa", Arch: tr.Arch, Processor: processors[tr.Config]})
		if err != nil {
			t.Errorf("%s %s: %v", tr.Config, tr.Arch, err)
			continue
		}
		rows := map[string]core.ModuleRow{} // by each module path a row stands for
		for _, r := range m.Describe() {
			for _, path := range expandBlocks(r.Path) {
				rows[path] = r
			}
		}
		names := map[string][]string{} // each tensor's names, its first one first
		for name := range tr.Params {
			names[name] = []string{name}
		}
		for alias, first := range tr.Aliases {
			names[first] = append(names[first], alias)
		}
		under := map[string]int64{}     // transformers' parameters under each module
		unlisted := map[string]string{} // a module describe() misses -> one of its parameters
		for first, n := range tr.Params {
			listed := false  // in a row of a module, under one of its names
			counted := false // under the modules of one name (tied weights count once, as describe() counts them)
			for _, name := range names[first] {
				nearest := ""
				for p := name; strings.Contains(p, "."); {
					p = p[:strings.LastIndexByte(p, '.')]
					if _, ok := rows[p]; ok && nearest == "" {
						nearest = p
					}
				}
				r, own := rows[name] // a parameter of a module's own, a row (LLaVA-NeXT's image_newline)
				listed = listed || own && r.Kind == "parameter" || nearest != "" && !containerKinds[rows[nearest].Kind]
				if m.Tied() && strings.HasPrefix(name, m.Head()+".") {
					continue // the tied head's row counts none of it
				}
				if counted {
					continue // a module tied to an earlier one (Zamba2's shared blocks) counts none of it either
				}
				counted = true
				if own {
					under[name] = n
				}
				for p := name; strings.Contains(p, "."); {
					p = p[:strings.LastIndexByte(p, '.')]
					under[p] += n
				}
			}
			if !listed {
				unlisted[first[:strings.LastIndexByte(first, '.')]] = first
			}
		}
		for _, module := range slices.Sorted(maps.Keys(unlisted)) {
			t.Errorf("%s: describe() lists no module holding %s", tr.Arch, unlisted[module])
		}
		for path, r := range rows {
			if m.Tied() && path == m.Head() {
				continue
			}
			if got, want := r.Params, under[path]; got != want {
				t.Errorf("%s: describe()'s %s (%s) has %d parameters, transformers' module %d", tr.Arch, r.Path, path, got, want)
			}
		}
	}
}

// containerKinds are the Describe rows that hold no parameter of their
// own, only their rows'.
var containerKinds = map[string]bool{"sequential": true, "repeat": true, "residual": true, "parallel": true, "module": true}
