package oracle

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
)

// TestVectors replays every stored vector (vectors/*.jsonl) through memsh
// and asserts each figure to the byte. MEMSH_ORACLE_VECTORS=FILE replays
// another file instead, and MEMSH_ORACLE_OUT=FILE writes memsh's figures
// for every vector there as JSON lines (difftest.py's shrinker reads them).
func TestVectors(t *testing.T) {
	files, err := filepath.Glob("vectors/*.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if f := os.Getenv("MEMSH_ORACLE_VECTORS"); f != "" {
		files = []string{f}
	}
	if len(files) == 0 {
		t.Fatal("no vectors found in vectors/")
	}
	var out *json.Encoder
	if f := os.Getenv("MEMSH_ORACLE_OUT"); f != "" {
		w, err := os.Create(f)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		out = json.NewEncoder(w)
	}
	n := 0
	for _, file := range files {
		vs, err := ReadVectors(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			n++
			got := checkVector(t, v)
			if out != nil {
				if err := out.Encode(map[string]any{"id": v.ID, "memsh": got}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("the vector files hold no vector")
	}
	t.Logf("%d vectors replayed", n)
}

// checkVector replays v at each measured depth and reports every figure
// that differs; it returns memsh's figures (or errors) by depth.
func checkVector(t *testing.T, v Vector) map[string]any {
	t.Helper()
	if len(v.Measured) == 0 {
		t.Errorf("%s: no measured depth", v.ID)
	}
	depths := make([]string, 0, len(v.Measured))
	for d := range v.Measured {
		depths = append(depths, d)
	}
	sort.Strings(depths)
	res := map[string]any{}
	stillOpen := false
	for _, d := range depths {
		depth, err := strconv.ParseInt(d, 10, 64)
		if err != nil || depth <= 0 {
			t.Errorf("%s: bad depth %q", v.ID, d)
			continue
		}
		got, src, err := Replay(v.Config, depth)
		if err != nil {
			res[d] = map[string]string{"error": err.Error()}
			if v.Open != nil && v.Open.Memsh[d].Error == err.Error() {
				stillOpen = true
				continue
			}
			t.Errorf("%s depth %d: %v\n%s", v.ID, depth, err, src)
			continue
		}
		res[d] = got // as compared
		if v.Open != nil {
			if diffs := compare(got, v.Open.Memsh[d].Figures); len(diffs) > 0 || v.Open.Memsh[d].Error != "" {
				t.Errorf("%s depth %d: memsh moved from the open difference recorded (%s); against PyTorch:\n%sagainst the record:\n%s",
					v.ID, depth, v.Open.Cause, compare(got, v.Measured[d]), diffs)
			}
			if compare(got, v.Measured[d]) != "" {
				stillOpen = true
			}
			continue
		}
		if diffs := compare(got, v.Measured[d]); len(diffs) > 0 {
			t.Errorf("%s depth %d (%s):\n%s", v.ID, depth, v.Command, diffs)
		}
	}
	if v.Open != nil && !stillOpen {
		t.Errorf("%s: the open difference (%s) is gone: move the vector to a passing file", v.ID, v.Open.Cause)
	}
	return res
}

func compare(got, want Figures) string {
	rows := []struct {
		name      string
		got, want int64
	}{
		{"params", got.Params, want.Params},
		{"trainable", got.Trainable, want.Trainable},
		{"param_bytes", got.ParamBytes, want.ParamBytes},
		{"grad_bytes", got.GradBytes, want.GradBytes},
		{"optimizer_bytes", got.OptimizerBytes, want.OptimizerBytes},
		{"saved_activations", got.SavedActivations, want.SavedActivations},
		{"saved_weight_copies", got.SavedWeightCopies, want.SavedWeightCopies},
	}
	s := ""
	for _, r := range rows {
		if r.got != r.want {
			s += fmt.Sprintf("  %s: memsh %d, PyTorch %d (%+d)\n", r.name, r.got, r.want, r.got-r.want)
		}
	}
	return s
}
