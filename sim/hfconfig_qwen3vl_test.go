package sim

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/units"
)

// Qwen3-VL and Qwen3.5's ForConditionalGeneration: the whole model and
// its vision tower (model.visual) as transformers 5.17.0 counts them on
// the meta device (tools/oracle/qwen3vl.py CONFIG --params: sum of
// p.numel() over model.parameters() and model.model.visual.parameters()).
//
//   - qwen3-vl-8b-instruct.json: Qwen/Qwen3-VL-8B-Instruct's config.json
//     (text: Qwen3 36 x 4096, 32 heads, 8 kv, intermediate 12288, vocab
//     151,936, untied; vision: 27 blocks of 1152, deepstack after 8, 16,
//     24), its values as public loaders' tests quote them (Cosmos-Reason2-8B's
//     backbone, a Qwen3-VL-8B adapter's official-checkpoint config).
//     8,767,123,696: the hub's safetensors figure reads 8.77B for this
//     checkpoint (not re-read in this session: the hub is not reachable
//     from this machine).
//   - qwen3-vl-30b-a3b-instruct.json: Qwen/Qwen3-VL-30B-A3B-Instruct's
//     config.json as a public loader's test transcribes it from the hub at
//     commit 1fc78ad (48 layers of 2048, 128 experts of 768, 8 a token).
//     31,070,754,032: the hub's figure reads 31.1B (same caveat).
//   - qwen3.5-35b-a3b.json and qwen3.5-4b.json (TestQwen3NextParams) under
//     their architectures[0], Qwen3_5MoeForConditionalGeneration and
//     Qwen3_5ForConditionalGeneration: the text model's count plus
//     Qwen3.5's tower (Qwen3-VL's without deepstack mergers).
func TestQwen3VLParams(t *testing.T) {
	for _, tc := range []struct {
		file, version string
		want, visual  int64
	}{
		{"qwen3-vl-8b-instruct.json", "5.17.0", 8_767_123_696, 576_388_336},
		{"qwen3-vl-8b-instruct.json", "4.57.1", 8_767_123_696, 576_388_336},
		{"qwen3-vl-30b-a3b-instruct.json", "5.17.0", 31_070_754_032, 538_631_408},
		{"qwen3.5-35b-a3b.json", "5.17.0", 34_660_610_688 + 446_571_248, 446_571_248},
		{"qwen3.5-4b.json", "5.17.0", 4_205_751_296 + 333_514_240, 333_514_240},
	} {
		m, err := hf.FromConfigOptions(readHF(t, tc.file), hf.Options{Attn: "flash", Transformers: tc.version})
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		if got := m.Params(); got != tc.want {
			t.Errorf("%s (transformers %s): %d parameters, want %d (%+d)", tc.file, tc.version, got, tc.want, got-tc.want)
		}
		var visual int64
		for _, l := range m.Layers {
			core.Walk(l, "", func(_ string, x core.Layer) {
				if x.Kind() == "vision_tower" || x.Kind() == "qwen3_vision_tower" {
					visual += x.Params()
				}
			})
		}
		if visual != tc.visual {
			t.Errorf("%s: the vision tower has %d parameters, want %d", tc.file, visual, tc.visual)
		}
	}
}

// The Qwen3-VL configs memsh refuses, each with the key and a hint: the
// family before the transformers release that first ships it (the 4.57.0
// wheel is the first with models/qwen3_vl and models/qwen3_vl_moe, absent
// from 4.56.2), eager vision attention, a deepstack index past the
// tower's blocks, a pos_embed grid that is not square, a tower whose
// width is not the language model's, experts= on the dense model.
func TestQwen3VLRefusals(t *testing.T) {
	// nested is the tiny config with obj's keys set (obj dropped when set
	// is nil)
	nested := func(obj string, set map[string]any) []byte {
		data, err := os.ReadFile("testdata/hf/qwen3-vl-tiny.json")
		if err != nil {
			t.Fatal(err)
		}
		var c map[string]any
		if err := json.Unmarshal(data, &c); err != nil {
			t.Fatal(err)
		}
		if set == nil {
			delete(c, obj)
		}
		for k, v := range set {
			c[obj].(map[string]any)[k] = v
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	vision := func(set map[string]any) []byte { return nested("vision_config", set) }
	tiny := readHF(t, "qwen3-vl-tiny.json")
	for _, tc := range []struct {
		name       string
		data       []byte
		opts       hf.Options
		want, hint string
	}{
		{"before 4.57", readHF(t, "qwen3-vl-30b-a3b-instruct.json"), hf.Options{Attn: "sdpa", Transformers: "4.56.2"},
			`model_type "qwen3_vl_moe" needs transformers 4.57 or later`, "Qwen3VLMoeForConditionalGeneration"},
		{"eager", tiny, hf.Options{Attn: "eager"}, "eager attention is not modelled", `attn="sdpa"`},
		{"deepstack index", vision(map[string]any{"deepstack_visual_indexes": []any{0, 4}}), hf.Options{Attn: "sdpa"}, `"vision_config.deepstack_visual_indexes" names block 4, not in 0..3`, ""},
		{"deepstack default", vision(map[string]any{"deepstack_visual_indexes": nil}), hf.Options{Attn: "sdpa"},
			`"vision_config.deepstack_visual_indexes" is missing, and Qwen3VLVisionConfig's default (8, 16, 24) names blocks past the tower's depth (4)`, ""},
		{"deepstack past the text layers", vision(map[string]any{"deepstack_visual_indexes": []any{0, 1, 2, 3}}), hf.Options{Attn: "sdpa"},
			`"vision_config.deepstack_visual_indexes" lists 4 features, more than the language model's layers ("text_config.num_hidden_layers": 3)`, ""},
		{"deepstack list", vision(map[string]any{"deepstack_visual_indexes": 8}), hf.Options{Attn: "sdpa"}, `"vision_config.deepstack_visual_indexes" must be a list`, ""},
		{"positions", vision(map[string]any{"num_position_embeddings": 60}), hf.Options{Attn: "sdpa"}, `"vision_config.num_position_embeddings" (60) is not a square`, "48 x 48"},
		{"width", vision(map[string]any{"out_hidden_size": 32}), hf.Options{Attn: "sdpa"}, "out_hidden_size (32) must be the language model's hidden_size (64)", ""},
		{"experts", tiny, hf.Options{Attn: "sdpa", Experts: "eager"}, `model_type "qwen3_vl" has no MoE blocks`, "qwen3_vl_moe"},
		// the language model's keys are text_config's, named by their path (review_s26)
		{"text key", nested("text_config", map[string]any{"num_attention_heads": 0}), hf.Options{Attn: "sdpa"}, `"text_config.num_attention_heads" must be positive`, ""},
		{"no text_config", nested("text_config", nil), hf.Options{Attn: "sdpa"}, `config.json has no "text_config" object (model_type "qwen3_vl" needs it)`, ""},
	} {
		_, err := hf.FromConfigOptions(tc.data, tc.opts)
		var ue *units.Error
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(ue.Hint, tc.hint) {
			t.Errorf("%s: %v (hint %q), want %q (hint with %q)", tc.name, err, hintOf(ue), tc.want, tc.hint)
		}
	}
	if _, err := hf.FromConfigOptions(readHF(t, "qwen3-vl-moe-tiny.json"), hf.Options{Attn: "sdpa", Experts: "eager"}); err != nil {
		t.Errorf("experts=\"eager\" on qwen3_vl_moe: %v", err)
	}
	// Too many image tokens for seq, named at the tower.
	m, err := hf.FromConfig(tiny, "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	p := tinyPlan(t, m)
	p.Images = core.Images{Count: 3, Height: 160, Width: 160} // 3 x 25 tokens
	if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "3 images of 160x160 pixels: 75 image tokens a sample, more than seq=64") {
		t.Errorf("too many image tokens: %v", err)
	}
}
