package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// What the images add in a tiny InternVL (sim/testdata/hf/internvl-tiny.json)
// as tools/oracle/internvl.py measures it; see TestInternVLVisionSavesAsTransformers.
func TestInternVLVisionSavesAsTransformers(t *testing.T) {
	checkImagesSaveCases(t, "internvl-tiny.json", hf.Options{Attn: "sdpa"}, 254_688, []imagesSaveCase{
		{core.Images{Count: 1, Height: 56, Width: 56}, 32, "fp32", false, 105_856},
	})
}
