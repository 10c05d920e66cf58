package hf

import (
	"os"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// TestExpertsMegatron: experts="megatron" runs every MoE block of a
// transformers 4.x reading as Megatron's grouped experts; a transformers 5
// reading and a dense model are refused.
func TestExpertsMegatron(t *testing.T) {
	for _, tc := range []struct {
		config, version string
		err             string // a part of the error ("" for none)
	}{
		{"qwen1.5-moe-a2.7b.json", "4.57.1", ""},
		{"moonlight-16b-a3b-instruct.json", "4.57.1", ""},
		{"qwen1.5-moe-a2.7b.json", "5.0.0", `pass transformers="4.57.1"`},
		{"qwen2.5-14b.json", "4.57.1", "no MoE block"},
	} {
		t.Run(tc.config+"@"+tc.version, func(t *testing.T) {
			data, err := os.ReadFile("../testdata/hf/" + tc.config)
			if err != nil {
				t.Fatal(err)
			}
			m, err := FromConfigOptions(data, Options{Attn: "flash", Transformers: tc.version, Experts: ExpertsMegatron})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error()+" "+hintOf(err), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			grouped, other := 0, 0
			var walk func(l core.Layer)
			walk = func(l core.Layer) {
				if x, ok := l.(*nn.MoE); ok {
					if x.Impl == nn.MoEGrouped {
						grouped++
					} else {
						other++
					}
				}
				for _, c := range l.Children() {
					walk(c)
				}
			}
			for _, l := range m.Layers {
				walk(l)
			}
			if grouped == 0 || other != 0 { // the layers share their block: each counted once a visit
				t.Errorf("%d MoE blocks grouped, %d not; want every one grouped", grouped, other)
			}
		})
	}
}
