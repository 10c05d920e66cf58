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
// transformers' model, which does both.
func TestImportedLabels(t *testing.T) {
	for _, tc := range []struct {
		name, file        string
		opts              Options
		padLabels, posIDs bool
	}{
		{"torchtune", "torchtune/llama3_1_8B_full_single_device.yaml", Options{Seq: 2048}, false, false},
		{"torchtitan_toml", "torchtitan/llama3_8b.toml", Options{}, false, false},
		{"torchtitan_py", pyRegistry, Options{Function: "llama3_8b", GPUs: 8}, false, false},
		{"hf_trainer", "hf/zephyr_sft_full.yaml", Options{}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			res, err := Import(tc.file, data, defaults(tc.opts))
			if err != nil {
				t.Fatal(err)
			}
			globals := runScript(t, "imported.star", res.Script, nil)
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
