package nn

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"
)

// TestMegatronHostOpsCounted holds megatronHost's counts to the CPU runs
// of Megatron-Core they come from (sim/testdata/megatron_moe_host.jsonl,
// tools/oracle/megatron_moe_host.py --fused): before the sync the router
// and dispatch_preprocess (core_v0.12.0: the whole token_permutation),
// after it the rest of the dispatch and the combine, and the backward.
func TestMegatronHostOpsCounted(t *testing.T) {
	f, err := os.Open("../testdata/megatron_moe_host.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type rec struct {
		Mcore, Case string
		Fused       bool
		Bwd         int32 `json:"bwd_aten"`
		Parts       map[string]int32
	}
	runs := map[[2]string]rec{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r rec
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Fused {
			runs[[2]string{r.Mcore, r.Case}] = r
		}
	}
	for _, c := range []struct {
		release, run string
		router       string
		norm, old    bool
	}{
		{"core_v0.13.0", "qwen15", RouterSoftmax, false, false},
		{"core_v0.13.0", "qwen3_swift", RouterSoftmax, true, false},
		{"core_v0.13.0", "moonlight", RouterSigmoid, true, false},
		{"core_v0.12.0", "qwen15", RouterSoftmax, false, true},
		{"core_v0.12.0", "qwen3_swift", RouterSoftmax, true, true},
		{"core_v0.12.0", "moonlight", RouterSigmoid, true, true},
	} {
		r, ok := runs[[2]string{c.release, c.run}]
		if !ok {
			t.Fatalf("%s %s: no fused run recorded", c.release, c.run)
		}
		got := megatronHostCounts(c.router, c.norm, c.old)
		p := r.Parts
		want := megatronHostOps{p["router"] + p["preprocess"] + p["dispatch"], p["combine"], r.Bwd}
		if c.release == "core_v0.13.0" { // the sync comes between preprocess and dispatch
			want = megatronHostOps{p["router"] + p["preprocess"], p["dispatch"] + p["combine"], r.Bwd}
		}
		if got != want {
			t.Errorf("%s %s: memsh counts %+v, the CPU run %+v", c.release, c.run, got, want)
		}
	}
}
