package sim

import (
	"fmt"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// What the images add to the storages autograd saves in a tiny Llama 3.2
// Vision (sim/testdata/hf/mllama-tiny.json: a vision model 32 wide with 4
// local and 2 global layers, tiles of 56 pixels in 14-pixel patches (17
// tokens a tile, padded to 24), 4 tiles, intermediate layers 1 and 3; a
// 4-layer text model 64 wide, 4 heads, 2 kv heads, cross-attention layers
// 1 and 3), trained in fp32 with sdpa on 32 tokens a sample: the step with
// the images minus the same step on text alone (transformers skips the
// cross-attention layers), as tools/oracle/mllama.py measures it
// (transformers 4.57.1, torch 2.15.0, on the CPU):
//
//	python mllama.py ../../sim/testdata/hf/mllama-tiny.json COUNT 32 BATCH
func TestMllamaImagesSaveAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		count, batch int64
		want         int64
	}{
		{1, 1, 1_655_324},
		{2, 1, 2_980_228},
		{1, 2, 3_310_596},
	} {
		p := visionPlan(t, "mllama-tiny.json", hf.Options{Attn: "sdpa"}, 279_499, "fp32")
		p.Seq, p.Batch = 32, tc.batch
		checkImagesSave(t, fmt.Sprintf("batch %d", tc.batch), p, core.Images{Count: tc.count, Height: 560, Width: 560}, tc.want)
	}
}
