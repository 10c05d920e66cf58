package sim

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// readJSONL is testdata/name (name itself when absolute), one T a line
// (the oracles' fixtures: flops_torch.jsonl, fsdp_live.jsonl,
// fused_ce_inductor.jsonl).
func readJSONL[T any](t testing.TB, name string) []T {
	t.Helper()
	if !filepath.IsAbs(name) {
		name = filepath.Join("testdata", name)
	}
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<22)
	for line := 1; sc.Scan(); line++ {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("testdata/%s:%d: %v", name, line, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("testdata/%s: %v", name, err)
	}
	return out
}
