package sim

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
)

// TestOverheadSources holds every overhead's name, bytes and source text
// (r.overheads) over layouts, NCCL settings, GPUs and module loadings
// that reach each branch of replay/nccl.go, nccl_p2p.go,
// nccl_megatron.go and device.go to sim/testdata/overhead_sources.txt,
// written by this test at main before session 43 worded the sources
// only when read (Overhead.Source): the same texts, the same bytes.
// Regenerate with MEMSH_UPDATE=1 go test ./sim -run TestOverheadSources
// only for a change that means to change them, and review the diff.
func TestOverheadSources(t *testing.T) {
	moe := &nn.MoE{Dim: 512, Hidden: 1024, Experts: 64, TopK: 2, Act: "swiglu"}
	m := &core.Model{Name: "m", Layers: []core.Layer{&core.Repeat{N: 4, Layer: moe}}, Loss: "mse", InputDim: 512}
	pars := []core.Parallelism{
		{DP: 8}, {DP: 16}, {DP: 8, FSDP: true}, {DP: 64, EP: 64}, {DP: 16, EP: 16}, {DP: 4, EP: 4},
		{PP: 4, TP: 2}, {PP: 2, TP: 8, SequenceParallel: true}, {PP: 2}, {DP: 2, CP: 2, CPMode: "ulysses"},
		{DP: 8, EP: 4, ETP: 1, DistributedOptimizer: true},
		{DP: 4, TP: 2, SequenceParallel: true, EP: 4, ETP: 2, DistributedOptimizer: true},
		{DP: 2, CP: 2, TP: 2, DistributedOptimizer: true, LossDPGroup: true},
		{DP: 2, PP: 4, TP: 8, DistributedOptimizer: true},
	}
	rts := []core.RuntimeMemory{{}, {NCCLConnect: "eager"}, {NCCLNVLS: "off"}, {NCCLNVLS: "on"}, {NCCLBuffSize: 1 << 20},
		{NCCLBuffSize: 512 << 10, NCCLNChannelsPerNetPeer: 4}, {NCCLConnect: "eager", ModuleLoading: "eager"}}
	var out strings.Builder
	for _, gpu := range []string{"H100-80GB", "A100-80GB", "L40S"} {
		dev, err := hw.LookupDevice(gpu)
		if err != nil {
			t.Fatal(err)
		}
		for _, par := range pars {
			for i, rt := range rts {
				if gpu != "H100-80GB" && i != 0 && i != len(rts)-1 { // every setting on H100; the others lazy, and eager with eager module loading
					continue
				}
				p := distPlan(t, m, "bf16", par)
				p.Device, p.RuntimeMemory = dev, rt
				fmt.Fprintf(&out, "%s %v %+v\n", gpu, par, rt)
				for _, o := range replay.Overheads(p) {
					// The catalog's source of the GPU's figures, as it is
					src := strings.ReplaceAll(o.Source(), dev.Source, "<gpu source>")
					fmt.Fprintf(&out, "\t%s %d %s\n", o.Name, o.Bytes, src)
				}
			}
		}
	}
	const file = "testdata/overhead_sources.txt"
	if os.Getenv("MEMSH_UPDATE") != "" {
		if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != string(want) {
		g, w := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(g), len(w)) {
			if g[i] != w[i] {
				t.Fatalf("line %d:\ngot  %s\nwant %s", i+1, g[i], w[i])
			}
		}
		t.Fatalf("%d lines, want %d", len(g), len(w))
	}
}
