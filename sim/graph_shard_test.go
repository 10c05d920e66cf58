package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
)

// TestGraphModelSharding is TestGraphTransformerProcessorSaved's layer
// (S = 10 nodes, E = 20 edges, C = 8, H = 2, fp16 autocast) sharded over
// G = 2 GPUs as anemoi's num_gpus_per_model does it (sim/graph/shard.go):
// the node-wise tensors hold this rank's S/G = 5 rows, the edge
// attributes its E/G = 10 rows; query, key, value and the projected edges
// are exchanged for all rows and H/G = 1 head (C/G = 4 channels), so the
// message passing's per-edge tensors and its scatter output are halved;
// the edge index stays whole. Counted by hand, as the one-GPU test:
//
//	layer_norm_attention: 4 x 5 x 8 + 8 x 5 = 200
//	lin_self/query/key/value fp16 casts: 4 x 2 x 5 x 8 = 320
//	lin_edge fp16 cast of edge_attr [10, 3]: 60
//	q_norm, k_norm: 2 x 4 x 5 x 8 + 2 x 8 x 5 x 2 = 480
//	conv: 2 x 2 x 20 x 4 + 2 x 20 x 4 + 8 x 20 x 1 + 4 x 20 x 1 + 16 x 20 = 1,040
//	projection fp16 cast: 2 x 5 x 8 = 80
//	layer_norm_mlp_dst: 4 x 5 x 8 + 8 x 5 = 200
//	node_dst_mlp: 2 x 5 x 8 + 2 x 8 x 5 x 8 = 720
//
// 3,100 bytes, where one GPU keeps 5,880; the scatter output is an fp32
// [10, 4] over all nodes (160 bytes).
func TestGraphModelSharding(t *testing.T) {
	p := gtProcessorPlan(t, "fp16-mixed", 1, "train")
	p.Members, p.Parallel = 1, core.Parallelism{CP: 2, CPMode: "ulysses"}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	prog, err := p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[core.Value]bool{}
	var saved int64
	for _, op := range prog.Ops {
		if !strings.HasPrefix(op.Name, "processor.") {
			continue
		}
		for _, v := range op.Saved {
			if !seen[v] && prog.Values[v].Cat == core.CatActivations {
				seen[v] = true
				saved += prog.Values[v].Bytes
			}
		}
	}
	if saved != 3_100 {
		t.Errorf("saved %d bytes for one sharded layer, want 3,100", saved)
		for v := range seen {
			t.Logf("  %s %v %s %d", prog.Values[v].Name, prog.Values[v].Shape, prog.Values[v].Dtype, prog.Values[v].Bytes)
		}
	}
	for _, v := range prog.Values {
		if strings.HasSuffix(v.Name, "scatter_out") && v.Bytes != 10*4*4 {
			t.Errorf("%s is %d B, want an fp32 [10, 4]", v.Name, v.Bytes)
		}
	}
}

// TestGraphModelShardingErrors: model sharding splits heads, needs
// Ulysses' all-to-all, and runs one sample per GPU.
func TestGraphModelShardingErrors(t *testing.T) {
	for _, tc := range []struct {
		par     core.Parallelism
		members int64
		mode    string
		want    string
	}{
		{core.Parallelism{CP: 5, CPMode: "ulysses"}, 1, "", "cp=5 does not divide the 2 heads"},
		{core.Parallelism{CP: 2}, 1, "", "is anemoi's model sharding (num_gpus_per_model), which splits heads"},
		{core.Parallelism{DP: 3, CP: 2, CPMode: "ulysses"}, 2, "spread", `members_mode="spread" runs each of the 2 members on its own GPU group: dp=3`},
	} {
		p := gtProcessorPlan(t, "fp16-mixed", 1, "train")
		p.Parallel, p.Members, p.MembersMode = tc.par, tc.members, tc.mode
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.par, err, tc.want)
		}
	}
}

// TestBrisModelSharding: MET's Bris (SEEDS.md story 1) with eight GPUs per
// member, two members each on its own group (members_mode="spread", dp=2
// groups, cp=8): the decoder's scatter output is an fp32 [1,359,281
// grid points, 1024/8 channels], the members' predictions are gathered for
// the loss as an fp32 [2, 1,359,281, 87], and stacked members are refused
// (anemoi asserts one sample per GPU under model sharding).
func TestBrisModelSharding(t *testing.T) {
	p := bris(t, 2, "spread", 16, 1, "train")
	p.Parallel = core.Parallelism{DP: 2, CP: 8, CPMode: "ulysses"}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	prog, err := p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	var scatter, gathered bool
	for _, v := range prog.Values {
		if strings.HasPrefix(v.Name, "decoder.") && strings.HasSuffix(v.Name, "scatter_out") {
			scatter = true
			if v.Bytes != 1_359_281*128*4 {
				t.Errorf("%s is %d B, want an fp32 [1359281, 128]", v.Name, v.Bytes)
			}
		}
		if strings.HasSuffix(v.Name, "members_gathered") {
			gathered = true
			if v.Bytes != 2*1_359_281*87*4 {
				t.Errorf("%s is %d B, want an fp32 [2, 1359281, 87]", v.Name, v.Bytes)
			}
		}
	}
	if !scatter || !gathered {
		t.Errorf("decoder scatter output found %v, members gathered %v", scatter, gathered)
	}
	stacked := bris(t, 2, "stacked", 16, 1, "train")
	stacked.Parallel = p.Parallel
	if err := stacked.Validate(); err == nil || !strings.Contains(err.Error(), "runs one sample per GPU") {
		t.Errorf("stacked members with model sharding: error %v", err)
	}
}
