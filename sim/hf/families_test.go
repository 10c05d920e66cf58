package hf

import (
	"os"
	"strings"
	"testing"
)

// Every family that needs a recent transformers release (since) or whose
// MoE experts transformers 5 rebuilds (experts) is named in
// docs/models.md, read from the family table: a new family's row is the
// one place that says so, and the page cannot fall behind it.
func TestFamiliesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/models.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range hfFamilies {
		if f.since == [2]int{} && f.experts == nil {
			continue
		}
		if !strings.Contains(string(doc), "`"+f.modelType+"`") {
			t.Errorf("docs/models.md does not name model_type `%s`", f.modelType)
		}
	}
}

// The families setExperts rebuilds are the table's rows with experts, and
// each model type is in the table once.
func TestFamilyTable(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range hfFamilies {
		if seen[f.modelType] {
			t.Errorf("model_type %q has two rows", f.modelType)
		}
		seen[f.modelType] = true
	}
	for _, mt := range expertsModelTypes() {
		if !seen[mt] {
			t.Errorf("experts family %q is not in the table", mt)
		}
	}
	for _, tc := range []struct {
		modelType string
		experts   bool
	}{
		{"mixtral", true}, {"gpt_oss", true}, {"deepseek_v3", true}, {"llama", false}, {"qwen3_5", false}, {"qwen3_5_moe", true},
	} {
		got := false
		for _, mt := range expertsModelTypes() {
			got = got || mt == tc.modelType
		}
		if got != tc.experts {
			t.Errorf("%s: experts rebuilt %v, want %v", tc.modelType, got, tc.experts)
		}
	}
}
