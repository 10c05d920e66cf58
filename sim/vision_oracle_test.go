package sim

import (
	"fmt"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// What two images add to the storages autograd saves in a tiny
// Qwen2.5-VL (sim/testdata/hf/qwen2.5-vl-tiny.json: a 4-block vision
// tower 32 wide, windows of 56 pixels, blocks 1 and 3 full; a 2-layer
// Qwen2 decoder 64 wide), trained in fp32 with sdpa on 64 tokens: the
// step with the images minus the same step with text tokens in their
// place, as tools/oracle/qwen25vl.py measures it (transformers 4.57.1,
// torch 2.15.0, on the CPU):
//
//	python qwen25vl.py ../../sim/testdata/hf/qwen2.5-vl-tiny.json 2 112 168 64
//	python qwen25vl.py ../../sim/testdata/hf/qwen2.5-vl-tiny.json 2 140 140 64
//
// 112 x 168 pixels are 8 x 12 patches, tiled by windows of 4 x 4 patches;
// 140 x 140 are 10 x 10, tiled by windows of 4, 4 and 2 patches a side.
// The figures include the fp32 pixel patches patch_embed saves (192 x
// 1,176 values), the rotary cos and sin tables, the window order's and its
// inverse's int64 indices, the copy sdpa's per-window outputs are
// concatenated into, and the placeholder mask masked_scatter keeps.
// Before the tables, the indices and the concatenation were modelled, memsh
// was 123,648 bytes (-4.0 %) and 128,800 bytes short. transformers 5.25.0
// measures the same two figures (tools/oracle/qwen2vl.py with the same
// arguments, mm_token_type_ids passed).
func TestQwen25VLImagesSaveAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		im   core.Images
		want int64
	}{
		{core.Images{Count: 2, Height: 112, Width: 168}, 3_128_896},
		{core.Images{Count: 2, Height: 140, Width: 140}, 3_259_264},
	} {
		p := visionPlan(t, "qwen2.5-vl-tiny.json", hf.Options{Attn: "sdpa"}, 198_304, "fp32")
		checkImagesSave(t, "", p, tc.im, tc.want)
	}
}

// visionPlan is tinyPlan of the vision-language model hf_config builds
// from sim/testdata/hf/config with opts, in precision; its parameters
// are the harness's count (its script, the model on the meta device).
func visionPlan(t *testing.T, config string, opts hf.Options, params int64, precision string) *core.Plan {
	t.Helper()
	m, err := hf.FromConfigOptions(readHF(t, config), opts)
	if err != nil {
		t.Fatal(config, err)
	}
	if got := m.Params(); got != params {
		t.Errorf("%s: params %d, want %d", config, got, params)
	}
	p := tinyPlan(t, m)
	if p.Precision, err = core.LookupPrecision(precision); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkImagesSave holds memsh to a harness's figure for what images add
// to the storages autograd saves: p's step with im minus the same step
// with text tokens in their place (what, the case; p is left without
// images).
func checkImagesSave(t *testing.T, what string, p *core.Plan, im core.Images, want int64) {
	t.Helper()
	p.Images = im
	with := evalPlan(t, p).SavedActivations
	p.Images = core.Images{}
	without := evalPlan(t, p).SavedActivations
	if got := with - without; got != want {
		t.Errorf("%s %v: the images add %d saved bytes, transformers %d (%+d, %+.2f %%)", what, im, got, want, got-want, 100*float64(got-want)/float64(want))
	}
}

// layerOf is the model's last layer of type T (a vision tower), the zero
// T (nil) when it has none.
func layerOf[T core.Layer](m *core.Model) T {
	var v T
	for _, l := range m.Layers {
		core.Walk(l, "", func(_ string, x core.Layer) {
			if t, ok := x.(T); ok {
				v = t
			}
		})
	}
	return v
}

// imagesSaveCase is one of a tower's oracle rows: what im adds to the
// saved storages at seq tokens, in precision, every layer checkpointed
// or not.
type imagesSaveCase struct {
	im        core.Images
	seq       int64
	precision string
	ckpt      bool
	want      int64
}

// checkImagesSaveCases runs checkImagesSave over cases on the vision-
// language model config builds with opts (params: the harness's count).
func checkImagesSaveCases(t *testing.T, config string, opts hf.Options, params int64, cases []imagesSaveCase) {
	t.Helper()
	for _, tc := range cases {
		p := visionPlan(t, config, opts, params, tc.precision)
		p.Seq = tc.seq
		if tc.ckpt {
			p.Checkpoint = core.Checkpoint{Mode: "full", Every: 1}
		}
		checkImagesSave(t, fmt.Sprintf("%s checkpoint %v", tc.precision, tc.ckpt), p, tc.im, tc.want)
	}
}
