package sim

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// hfTree is one line of testdata/hf_names.jsonl: the module tree
// transformers builds for one model class from a tiny config
// (tools/oracle/hf_names.py: transformers 5.25.0, torch 2.15.0, on the
// meta device).
type hfTree struct {
	Config, Arch string
	Params       map[string]int64  // named_parameters(): each tensor once, by its first name
	Aliases      map[string]string // a tied tensor's other names: alias -> its named_parameters() name
	Modules      []string          // named_modules(), "" the root
}

// TestHFNamesAsTransformers holds the names hf_config gives GPT-2's and
// the encoders' parameters and modules to transformers' own (the names
// rule: what users see in reports and write in lora(targets=),
// checkpoint(modules=) and freeze= is the model's tree): every memsh
// parameter is a name of the model's, every tensor of the model's is
// one of memsh's with its element count (a tied head's weight and bias
// answer to the embedding's and cls.predictions.bias's names,
// aliases), and every op runs in one of the model's modules or in
// memsh's loss, which transformers computes in the root's forward.
// Under SDPA and eager attention alike. MEMSH_HF_NAMES names another
// file of hf_names.py's lines in their place (the survey: hf_names.py
// --all writes every config's).
func TestHFNamesAsTransformers(t *testing.T) {
	var trees []hfTree
	if survey := os.Getenv("MEMSH_HF_NAMES"); survey != "" {
		trees = readJSONL[hfTree](t, survey)
	} else {
		trees = readJSONL[hfTree](t, "hf_names.jsonl")
		checkHFNamesCases(t, trees)
	}
	processors := hfTestProcessors()
	for _, tr := range trees {
		modules := map[string]bool{"loss": true}
		for _, m := range tr.Modules {
			modules[m] = true
		}
		for _, attn := range []string{"sdpa", "eager"} {
			m, err := hf.FromConfigOptions(readHF(t, tr.Config), hf.Options{Attn: attn, Arch: tr.Arch, Processor: processors[tr.Config]})
			if attn == "eager" && err != nil && strings.Contains(err.Error(), "eager attention is not modelled") {
				continue // the families whose eager attention memsh refuses (multi-head latent attention)
			}
			if err != nil {
				t.Fatalf("%s %s %s: %v", tr.Config, tr.Arch, attn, err)
			}
			prog, err := tinyPlan(t, m).LowerProgram()
			if err != nil {
				t.Fatalf("%s %s: %v", tr.Config, tr.Arch, err)
			}
			got := map[string]int64{}
			for _, p := range prog.Params {
				name := p.Name
				if first, ok := tr.Aliases[name]; ok {
					name = first
				}
				if _, ok := tr.Params[name]; !ok {
					t.Errorf("%s %s: memsh's parameter %s is not the model's", tr.Arch, attn, p.Name)
				}
				got[name] = p.FullNumel
			}
			var missing []string
			for name, n := range tr.Params {
				switch g, ok := got[name]; {
				case !ok:
					missing = append(missing, name)
				case g != n:
					t.Errorf("%s %s: %s has %d elements in memsh, %d in transformers", tr.Arch, attn, name, g, n)
				}
			}
			sort.Strings(missing)
			for _, name := range missing {
				t.Errorf("%s %s: the model's parameter %s is missing from memsh's", tr.Arch, attn, name)
			}
			for _, row := range m.Describe() { // the printed tree: each block range a module of every block
				for _, path := range expandBlocks(row.Path) {
					_, param := tr.Params[path] // a parameter of a module's own (LLaVA-NeXT's image_newline)
					if row.Kind == "parameter" && !param || row.Kind != "parameter" && !modules[path] {
						t.Errorf("%s %s: memsh's %s %s is not the model's", tr.Arch, attn, row.Kind, path)
					}
				}
			}
			bad := map[string]bool{}
			for _, op := range prog.Ops {
				if !modules[op.Module] && !bad[op.Module] {
					bad[op.Module] = true
					t.Errorf("%s %s: op %s runs in module %q, which the model does not have", tr.Arch, attn, op.Name, op.Module)
				}
			}
		}
	}
}

// hfTestProcessors are the processor options the configs of the
// differential tests need: the tiny LFM2-VL towers' patches.
func hfTestProcessors() map[string][]byte {
	return map[string][]byte{"lfm2_vl-tiny.json": lfm2VLProcessor(""), "lfm2_vl-nonorm-tiny.json": lfm2VLProcessor(""), "lfm2_vl-moe-tiny.json": lfm2VLProcessor("")}
}

// expandBlocks is the module paths a Describe row's path stands for: one
// per block of each index list ("layer.0-1.attention": layer.0.attention
// and layer.1.attention; "layers.0,2.mlp").
func expandBlocks(path string) []string {
	out := []string{""}
	for i, part := range strings.Split(path, ".") {
		alts := blockIndices(part)
		var next []string
		for _, o := range out {
			for _, a := range alts {
				if i == 0 {
					next = append(next, a)
				} else {
					next = append(next, o+"."+a)
				}
			}
		}
		out = next
	}
	return out
}

// blockIndices expands one path component: "0-2,5" is 0, 1, 2 and 5; any
// other component is itself.
func blockIndices(part string) []string {
	var out []string
	for _, r := range strings.Split(part, ",") {
		lo, hi, _ := strings.Cut(r, "-")
		if hi == "" {
			hi = lo
		}
		a, errA := strconv.Atoi(lo)
		b, errB := strconv.Atoi(hi)
		if errA != nil || errB != nil {
			return []string{part}
		}
		for k := a; k <= b; k++ {
			out = append(out, strconv.Itoa(k))
		}
	}
	return out
}

// TestGemmaEmbedScaleModule: Gemma's embedding normaliser runs where
// transformers runs it: in embed_tokens' forward with its 0-dim buffer
// model.embed_tokens.embed_scale from 5.4 (GemmaTextScaledWordEmbedding),
// in GemmaModel.forward with a host scalar before; Gemma 3 has the
// buffer in every release.
func TestGemmaEmbedScaleModule(t *testing.T) {
	for _, tc := range []struct {
		config, transformers, module string
		buffer                       bool
	}{
		{"gemma-tiny.json", "5.25.0", "model.embed_tokens", true},
		{"gemma-tiny.json", "5.3.0", "model", false},
		{"gemma2-tiny.json", "5.3.0", "model", false},
		{"gemma3-tiny.json", "4.57.1", "model.embed_tokens", true},
	} {
		m, err := hf.FromConfigOptions(readHF(t, tc.config), hf.Options{Attn: "sdpa", Transformers: tc.transformers})
		if err != nil {
			t.Fatalf("%s %s: %v", tc.config, tc.transformers, err)
		}
		prog, err := tinyPlan(t, m).LowerProgram()
		if err != nil {
			t.Fatalf("%s %s: %v", tc.config, tc.transformers, err)
		}
		var modules []string
		for _, op := range prog.Ops {
			if strings.HasSuffix(op.Name, ".embed_scale") {
				modules = append(modules, op.Module)
			}
		}
		if len(modules) != 1 || modules[0] != tc.module {
			t.Errorf("%s %s: embed_scale runs in %q, want [%s]", tc.config, tc.transformers, modules, tc.module)
		}
		buffer := false
		for _, v := range prog.Buffers {
			buffer = buffer || v.Name == "model.embed_tokens.embed_scale"
		}
		if buffer != tc.buffer {
			t.Errorf("%s %s: buffer model.embed_tokens.embed_scale %v, want %v", tc.config, tc.transformers, buffer, tc.buffer)
		}
	}
}

// TestQwen3VLDeepstackModule: Qwen3VLTextModel.forward adds each deepstack
// feature after its decoder layer returns (_deepstack_process), so the op
// runs in model.language_model, not in a module of its own nor the layer.
func TestQwen3VLDeepstackModule(t *testing.T) {
	m, err := hf.FromConfig(readHF(t, "qwen3-vl-tiny.json"), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	p := tinyPlan(t, m)
	p.Images = core.Images{Count: 1, Height: 224, Width: 224}
	prog, err := p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	var modules []string
	for _, op := range prog.Ops {
		if op.Kind == "deepstack" {
			modules = append(modules, op.Module)
		}
	}
	if want := []string{"model.language_model", "model.language_model"}; !slices.Equal(modules, want) {
		t.Errorf("deepstack ops run in %q, want %q (the tiny config's 2 deepstack features)", modules, want)
	}
}

// hfNamesCase is a config of tools/oracle/hf_names.py's CASES list.
var hfNamesCase = regexp.MustCompile(`(?m)^\s+\("([^"]+\.json)",`)

// checkHFNamesCases: every config hf_names.py's CASES names has its lines
// in testdata/hf_names.jsonl, and every line's config is one of them (the
// file is what the script writes, no more, no less).
func checkHFNamesCases(t *testing.T, trees []hfTree) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "tools", "oracle", "hf_names.py"))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]bool{}
	for _, m := range hfNamesCase.FindAllStringSubmatch(string(src), -1) {
		cases[m[1]] = true
	}
	if len(cases) < 100 {
		t.Fatalf("%d configs read from hf_names.py's CASES: the pattern no longer matches its lines", len(cases))
	}
	have := map[string]bool{}
	for _, tr := range trees {
		have[tr.Config] = true
		if !cases[tr.Config] {
			t.Errorf("hf_names.jsonl has %s, which hf_names.py's CASES do not name", tr.Config)
		}
	}
	for c := range cases {
		if !have[c] {
			t.Errorf("hf_names.py's CASES name %s, which hf_names.jsonl lacks: run tools/oracle/hf_names.py", c)
		}
	}
}
