package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/nn"
)

// The tiles of an image under a processor size["longest_edge"] other
// than the hub's 4 x image_size, as the processors cut them
// (idefics3_inputs.py's grid, which runs image_processing_idefics3.py's
// functions, transformers 5.25.0):
//
//	cd tools/oracle && /work/venv-t/bin/python -c 'from idefics3_inputs import grid; print(grid(H, W, TILE, LONGEST))'
//
// A longest edge of at most one tile leaves every image unsplit (0 x 0:
// one tile); past MAX_IMAGE_SIZE (4096) the image is scaled back to it.
func TestIdefics3ProcessorTiles(t *testing.T) {
	sizes := [][2]int64{{100, 80}, {1080, 1920}, {480, 640}, {1, 4000}, {3000, 17}, {512, 512}}
	for _, tc := range []struct {
		tile, longest int64
		grids         [6][2]int64 // rows, cols of each of sizes
	}{
		{512, 1536, [6][2]int64{{3, 3}, {2, 3}, {3, 3}, {1, 3}, {3, 1}, {3, 3}}},
		{512, 1024, [6][2]int64{{2, 2}, {2, 2}, {2, 2}, {1, 2}, {2, 1}, {2, 2}}},
		{512, 700, [6][2]int64{{2, 2}, {2, 2}, {2, 2}, {1, 2}, {2, 1}, {2, 2}}},
		{512, 512, [6][2]int64{}},
		{364, 728, [6][2]int64{{2, 2}, {2, 2}, {2, 2}, {1, 2}, {2, 1}, {2, 2}}},
		{384, 1536, [6][2]int64{{4, 4}, {3, 4}, {3, 4}, {1, 4}, {4, 1}, {4, 4}}},
		{512, 6000, [6][2]int64{{8, 7}, {5, 8}, {6, 8}, {1, 8}, {8, 1}, {8, 8}}},
		{32, 64, [6][2]int64{{2, 2}, {2, 2}, {2, 2}, {1, 2}, {2, 1}, {2, 2}}},
		{32, 20, [6][2]int64{}},
	} {
		v := &nn.Idefics3Vision{SquareTile: nn.SquareTile{Image: tc.tile, Patch: 16}, Scale: 4, Longest: tc.longest}
		for i, s := range sizes {
			if r, c := v.Grid(s[0], s[1]); r != tc.grids[i][0] || c != tc.grids[i][1] {
				t.Errorf("%dx%d at %d, longest edge %d: %dx%d tiles, the processor %dx%d", s[0], s[1], tc.tile, tc.longest, r, c, tc.grids[i][0], tc.grids[i][1])
			}
		}
	}
	// do_image_splitting=False: one tile, written as an unsplit image
	// (SmolVLM-256M: 64 tokens and 3 tags).
	v := &nn.Idefics3Vision{SquareTile: nn.SquareTile{Image: 512, Patch: 16}, Scale: 4, NoSplit: true}
	if n, tok := v.Tiles(1080, 1920), v.ImageTokens(1080, 1920); n != 1 || tok != 67 {
		t.Errorf("1080x1920 unsplit at 512: %d tiles, %d tokens; want 1, 67", n, tok)
	}
}

// processor= (a preprocessor_config.json) sets the tower's longest edge
// and splitting; what memsh does not model is refused, naming the key;
// families that do not read it refuse it.
func TestIdefics3Processor(t *testing.T) {
	for _, tc := range []struct {
		config, processor string
		longest           int64
		noSplit           bool
	}{
		{"smolvlm-256m-instruct.json", `{"size": {"longest_edge": 1536}, "max_image_size": {"longest_edge": 512}, "do_image_splitting": true}`, 1536, false},
		{"smolvlm-256m-instruct.json", `{"do_image_splitting": false}`, 0, true},
		{"idefics3-tiny.json", `{"image_processor_type": "Idefics3ImageProcessor"}`, 0, false},
	} {
		m, err := hf.FromConfigOptions(readHF(t, tc.config), hf.Options{Attn: "sdpa", Processor: []byte(tc.processor)})
		if err != nil {
			t.Fatal(tc.processor, err)
		}
		if v := layerOf[*nn.Idefics3Vision](m); v == nil || v.Longest != tc.longest || v.NoSplit != tc.noSplit {
			t.Errorf("%s: tower %+v, want longest %d, no split %v", tc.processor, v, tc.longest, tc.noSplit)
		}
	}
	for _, tc := range []struct {
		config, processor, want string
	}{
		{"idefics3-tiny.json", `{"size": {"height": 64, "width": 64}}`, `preprocessor_config.json: "size.longest_edge" is missing`},
		{"idefics3-tiny.json", `{"size": {"longest_edge": 0}}`, `"size.longest_edge"`},
		{"idefics3-tiny.json", `{"size": 64}`, `preprocessor_config.json: it has no "size" object`},
		{"idefics3-tiny.json", `{"max_image_size": {"longest_edge": 64}}`, `"max_image_size.longest_edge" is 64: memsh models tiles of vision_config's image_size (32)`},
		{"idefics3-tiny.json", `{"do_image_splitting": "no"}`, `"do_image_splitting" must be true or false`},
		{"idefics3-tiny.json", `{"size": `, `malformed preprocessor_config.json`},
		{"idefics3-tiny.json", `[]`, `preprocessor_config.json must be a JSON object`},
		{"llama-gqa-tiny.json", `{}`, `processor= is not read for model_type "llama"`},
	} {
		_, err := hf.FromConfigOptions(readHF(t, tc.config), hf.Options{Attn: "sdpa", Processor: []byte(tc.processor)})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.processor, err, tc.want)
		}
	}
}
