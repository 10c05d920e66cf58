package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// What the images add to the storages autograd saves in a tiny Gemma 4
// with its vision tower (sim/testdata/hf/gemma4-vl-tiny.json: a 2-layer
// tower 32 wide, 2 heads of 16, patches of 4 pixels, pooling 2 x 2, 16
// soft tokens an image (64 patches, padded), clipped linears as E2B and
// E4B have them; gemma4-vl-std-tiny.json: the same without clipping and
// with standardize, as 26B A4B and 31B; both before gemma4-tiny.json's
// 4-layer text model 128 wide), trained on 64 tokens: the step with the
// images minus the same step with text tokens in their place, as
// tools/oracle/gemma4vl.py measures it (transformers 5.17.0, torch 2.15.0,
// on the CPU; parameters and buffers excluded: the clamps save their
// clip bounds, the buffers themselves):
//
//	/work/venv-t/bin/python gemma4vl.py ../../sim/testdata/hf/gemma4-vl-tiny.json 2 64 96 64 [bf16] [eager]
//	/work/venv-t/bin/python gemma4vl.py ../../sim/testdata/hf/gemma4-vl-tiny.json 1 32 32 64 [eager]
//	/work/venv-t/bin/python gemma4vl.py ../../sim/testdata/hf/gemma4-vl-tiny.json 3 40 80 64
//	/work/venv-t/bin/python gemma4vl.py ../../sim/testdata/hf/gemma4-vl-std-tiny.json 2 64 96 64 [bf16]
//	/work/venv-t/bin/python gemma4vl.py ../../sim/testdata/hf/gemma4-vl-std-tiny.json 1 32 32 64
//	/work/venv-t/bin/python gemma4vl.py ../../sim/testdata/hf/gemma4-vl-std-tiny.json 1 200 50 64
//
// The processor resizes 64 x 96 pixels to 24 x 32 (48 patches, 12 soft
// tokens, padded to 64 patches), 40 x 80 to 16 x 40 (40 patches, 10
// tokens), 200 x 50 to 64 x 16; 32 x 32 fills the 64 patches (no padding:
// SDPA gets no mask). The figures are: the scaled pixel patches
// input_proj saves, the clamped (x, y) positions both table lookups save,
// the padding mask (torch.where, masked_fill), per layer the Gemma 4
// RMSNorms' fp32 inputs, statistics and normalised rows, the clamps'
// inputs (clipped), q and k after their 2-D rope, v after v_norm, the
// kernel's output and logsumexp and, with padding, the additive mask SDPA
// converts the boolean one into (one per layer; eager saves its fp32
// probabilities instead), the MLP's gate, up, GELU and product; the rope
// tables once; the pooler's one-hot weights [images, soft tokens,
// patches] in fp32 and the kept-token mask; embed_vision's norm; the
// placeholder mask. In bf16 (the model cast as a whole, precision="bf16")
// the pixel patches are fp32 and input_proj saves their bf16 copy, the
// pooler and standardize run in fp32 (std_scale.float() a new fp32 copy,
// saved).
func TestGemma4VisionSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		config    string
		params    int64
		im        core.Images
		want      int64
		precision string
		attn      string
	}{
		{"gemma4-vl-tiny.json", 735_552, core.Images{Count: 2, Height: 64, Width: 96}, 1_587_616, "", ""},
		{"gemma4-vl-tiny.json", 735_552, core.Images{Count: 1, Height: 32, Width: 32}, 762_128, "", ""},
		{"gemma4-vl-tiny.json", 735_552, core.Images{Count: 3, Height: 40, Width: 80}, 2_379_808, "", ""},
		{"gemma4-vl-tiny.json", 735_552, core.Images{Count: 2, Height: 64, Width: 96}, 1_026_208, "bf16", ""},
		{"gemma4-vl-tiny.json", 735_552, core.Images{Count: 2, Height: 64, Width: 96}, 1_651_104, "", "eager"},
		{"gemma4-vl-tiny.json", 735_552, core.Images{Count: 1, Height: 32, Width: 32}, 826_640, "", "eager"},
		{"gemma4-vl-std-tiny.json", 735_552, core.Images{Count: 2, Height: 64, Width: 96}, 1_030_560, "", ""},
		{"gemma4-vl-std-tiny.json", 735_552, core.Images{Count: 1, Height: 32, Width: 32}, 483_600, "", ""},
		{"gemma4-vl-std-tiny.json", 735_552, core.Images{Count: 2, Height: 64, Width: 96}, 747_808, "bf16", ""},
		{"gemma4-vl-std-tiny.json", 735_552, core.Images{Count: 1, Height: 200, Width: 50}, 483_600, "", ""},
	} {
		if tc.attn == "" {
			tc.attn = "sdpa"
		}
		m, err := hf.FromConfigOptions(readHF(t, tc.config), hf.Options{Attn: tc.attn, Transformers: "5.17.0"})
		if err != nil {
			t.Fatal(tc.config, err)
		}
		if got := m.Params(); got != tc.params {
			t.Errorf("%s: params %d, want %d", tc.config, got, tc.params)
		}
		p := tinyPlan(t, m)
		if tc.precision == "" {
			tc.precision = "fp32"
		}
		p.Precision, err = core.LookupPrecision(tc.precision)
		if err != nil {
			t.Fatal(err)
		}
		p.Images = tc.im
		with := evalPlan(t, p).SavedActivations
		p.Images = core.Images{}
		without := evalPlan(t, p).SavedActivations
		if got := with - without; got != tc.want {
			t.Errorf("%s %v %s %s: the images add %d saved bytes, transformers %d (%+.2f %%)", tc.config, tc.im, tc.precision, tc.attn, got, tc.want, 100*float64(got-tc.want)/float64(tc.want))
		}
	}
}
