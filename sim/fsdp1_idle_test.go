package sim

import (
	"fmt"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// TestFSDP1RootHoldsIdleTower: FullyShardedDataParallel flattens every
// parameter of a wrapped module into its unit's FlatParameter whether the
// step reads it or not, and unshard all-gathers the whole padded flat
// parameter (torch/distributed/fsdp/_flat_param.py at fe03cf693c:
// FlatParamHandle._init_flat_param_and_metadata,
// _alloc_padded_unsharded_flat_param); its gradient is the whole flat
// tensor too. The tiny Qwen2.5-VL (fp32, DP 2) without images reads none
// of its vision tower, but the root unit (everything outside the
// Qwen2_5_VLVisionBlock and decoder-layer units) holds the tower's
// patch embedding (37,632 elements) and merger (32 + 16,384 + 128 +
// 8,192 + 64) beside the embedding (19,200, tied to lm_head) and the
// final norm (64): 81,696 elements, 326,784 bytes gathered and as many of
// flat gradient, 163,392 of shard; memsh gathered the 19,264 the step
// reads (77,056 bytes). The wrap moves the six tower parameters to the GPU
// with the root's. The four vision blocks, units that never run, stay
// shards of 10,592 elements (42,368 bytes each). With an image the tower
// runs and the root is the same size.
func TestFSDP1RootHoldsIdleTower(t *testing.T) {
	for _, im := range []core.Images{{}, {Count: 1, Height: 56, Width: 56}} {
		p := visionPlan(t, "qwen2.5-vl-tiny.json", hf.Options{Attn: "sdpa", Transformers: "5.25.0"}, 198_304, "fp32")
		p.Parallel, p.Images = core.Parallelism{DP: 2, FSDP: true, FSDPVersion: 1}, im
		rep, err := Evaluate(p, core.Options{Trace: true})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]int64{}
		for _, e := range rep.Trace.Events {
			if e.Action == "alloc" {
				got[e.Tensor] = append(got[e.Tensor], e.Size)
			}
		}
		for tensor, want := range map[string]string{
			"root FlatParameter (wrap)":                    "[326784]",
			"root flat shard":                              "[163392]",
			"root unsharded flat parameter":                "[326784]",
			"root unsharded flat gradient":                 "[326784]",
			"root reduce-scatter output":                   "[163392]",
			"model.visual.patch_embed.proj.weight (wrap)":  "[150528]",
			"model.visual.merger.mlp.0.weight (wrap)":      "[65536]",
			"root flat shard (never run)":                  "[]",
			"model.visual.blocks.0 flat shard (never run)": "[21184]",
		} {
			if im.Count > 0 && tensor == "model.visual.blocks.0 flat shard (never run)" {
				want = "[]" // the blocks run: units of their own
			}
			if fmt.Sprint(got[tensor]) != want {
				t.Errorf("images %v: %s allocated %v, want %s", im, tensor, got[tensor], want)
			}
		}
	}
}
