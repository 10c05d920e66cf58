package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// What the images add to the storages autograd saves in a tiny Qwen2-VL
// (sim/testdata/hf/qwen2-vl-tiny.json: a 2-block tower 32 wide, 2 heads,
// quick_gelu MLPs of 64 (mlp_ratio 2), patches of 14 merged 2 x 2 into
// the 64 wide tokens of a 2-layer Qwen2 decoder), the step with the
// images minus the same step with text tokens in their place, as
// tools/oracle/qwen2vl.py measures it (transformers 5.25.0, torch 2.15.0,
// sdpa, on the CPU; parameters and buffers excluded):
//
//	/work/venv-t/bin/python qwen2vl.py ../../sim/testdata/hf/qwen2-vl-tiny.json 1 56 56 32
//	/work/venv-t/bin/python qwen2vl.py ../../sim/testdata/hf/qwen2-vl-tiny.json 2 112 168 64
//	/work/venv-t/bin/python qwen2vl.py ../../sim/testdata/hf/qwen2-vl-tiny.json 2 140 140 64
//	/work/venv-t/bin/python qwen2vl.py ../../sim/testdata/hf/qwen2-vl-tiny.json 3 56 84 64
//	/work/venv-t/bin/python qwen2vl.py ../../sim/testdata/hf/qwen2-vl-tiny.json 2 112 168 64 bf16
//	/work/venv-t/bin/python qwen2vl.py ../../sim/testdata/hf/qwen2-vl-tiny.json 2 112 168 64 ckpt
//	/work/venv-t/bin/python qwen2vl.py ../../sim/testdata/hf/qwen2-vl-tiny.json 2 112 168 64 bf16 ckpt
//
// 112 x 168 pixels are 8 x 12 patches (48 image tokens an image), 140 x
// 140 are 10 x 10 (smart_resize rounds to multiples of 28 pixels).
// Qwen2-VL's blocks attend within their image, so the patches keep the
// processor's order: no window index copies, unlike Qwen2.5-VL. With
// every block checkpointed (Qwen2VLVisionBlock is a
// GradientCheckpointingLayer; use_reentrant=False) memsh counts the rotary
// cos and sin beside what autograd packs, as for Kimi K2.5
// (TestKimiVisionSavesAsTransformers): the recompute's arguments hold
// them until the blocks' backward, where no saved-tensor hook sees them.
func TestQwen2VLImagesSaveAsTransformers(t *testing.T) {
	const tables = 2 * (2 * 8 * 12) * (32 / 2) * 4 // cos and sin: patches x head_dim, fp32
	// qwen2vl.py on the meta device: 173,056 parameters, model.visual
	// 79,552 of them
	checkImagesSaveCases(t, "qwen2-vl-tiny.json", hf.Options{Attn: "sdpa"}, 173_056, []imagesSaveCase{
		{core.Images{Count: 1, Height: 56, Width: 56}, 32, "fp32", false, 156_064},
		{core.Images{Count: 2, Height: 112, Width: 168}, 64, "fp32", false, 1_872_448},
		{core.Images{Count: 2, Height: 140, Width: 140}, 64, "fp32", false, 1_950_464},
		{core.Images{Count: 3, Height: 56, Width: 84}, 64, "fp32", false, 702_208},
		{core.Images{Count: 2, Height: 112, Width: 168}, 64, "bf16", false, 950_080},
		{core.Images{Count: 2, Height: 112, Width: 168}, 64, "fp32", true, 1_052_224 + tables},
		{core.Images{Count: 2, Height: 112, Width: 168}, 64, "bf16", true, 526_144 + tables},
	})
}
