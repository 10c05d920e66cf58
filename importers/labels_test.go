package importers

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/memsh/memsh/builtins/models"
	"go.starlark.net/starlark"
)

// TestImportedLabels holds each trainer's imported model to the labels
// and position_ids that trainer really has (models.go, zooModel.expr):
// torchtune's and torchtitan's loaders yield the labels shifted and
// their models make no position_ids, so the model neither pads the
// labels nor hands its layers position_ids; the Hugging Face Trainer runs
// transformers' model, which does both. hf_config(--model) under torchtune
// or torchtitan takes the config's shapes, not transformers' loop.
var llama3Config = map[string]string{"llama-3-8b.json": "../../sim/testdata/hf/llama-3-8b.json"}

func TestImportedLabels(t *testing.T) {
	for _, tc := range []struct {
		name, file        string
		opts              Options
		files             map[string]string // as importCase's
		padLabels, posIDs bool
	}{
		{"torchtune", "torchtune/llama3_1_8B_full_single_device.yaml", Options{Seq: 2048}, nil, false, false},
		{"torchtune_hf_config", "torchtune/llama3_1_8B_full.yaml", Options{Seq: 1024, Model: "llama-3-8b.json"}, llama3Config, false, false},
		{"torchtitan_toml", "torchtitan/llama3_8b.toml", Options{}, nil, false, false},
		{"torchtitan_py", pyRegistry, Options{Function: "llama3_8b", GPUs: 8}, nil, false, false},
		{"hf_trainer", "hf/zephyr_sft_full.yaml", Options{}, nil, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			o := defaults(tc.opts)
			if p, ok := tc.files[o.Model]; ok {
				if o.ModelData, err = os.ReadFile(filepath.Join("testdata", p)); err != nil {
					t.Fatal(err)
				}
			}
			res, err := Import(tc.file, data, o)
			if err != nil {
				t.Fatal(err)
			}
			globals := runScript(t, "imported.star", res.Script, tc.files)
			plan, ok := globals["plan"]
			if !ok {
				t.Fatalf("no plan in\n%s", res.Script)
			}
			mv, err := plan.(interface {
				Attr(string) (starlark.Value, error)
			}).Attr("model")
			if err != nil {
				t.Fatal(err)
			}
			m := mv.(*models.Model).Sim()
			if m.PadLabels != tc.padLabels || m.PositionIDs != tc.posIDs {
				t.Errorf("pad_labels %v, position_ids %v; want %v, %v\n%s", m.PadLabels, m.PositionIDs, tc.padLabels, tc.posIDs, res.Script)
			}
		})
	}
}
