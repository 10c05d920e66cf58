package sim

import (
	"maps"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
)

// TestMegatronStageComms: the communicators Megatron-LM makes for a
// shared embedding and a biased router (replay/nccl_megatron.go), per
// pipeline stage, hand-counted on H100s (32 channels in a node, 16
// across; 12 MiB a connection, lazy NCCL; with each communicator's init,
// (3 x channels + 2) x 2 MiB, replay/nccl.go ncclInitMem):
//
//   - a tied embedding under pp 2 x dp 4 (8 GPUs, one node): the first and
//     the last stage all-reduce the embedding's gradient over their own
//     two-rank EMBEDDING_GROUP, a ring in the node, 32 x 12 MiB = 384 MiB
//     (no NVLS with two ranks) and 196 MiB of init; untied, no such group;
//   - pp 4 x dp 4 on two nodes of 8: stages 0 and 3 are 12 ranks apart,
//     across nodes, where an all-reduce connects the ring and the tree,
//     16 x 3 x 12 MiB = 576 MiB, and 100 MiB of init; stages 1 and 2 are
//     not in the group;
//   - DeepSeek-V3's multi-token prediction module on the last stage (its
//     own copy of the embedding) makes the embedding group too, and its
//     router's expert bias (e_score_correction_bias) the tensor-and-data-
//     parallel group, each stage's 4 dp ranks in the node: a ring, 384
//     MiB and its init, with or without the MTP module.
func TestMegatronStageComms(t *testing.T) {
	const mib = 1 << 20
	ring8, ringTree16 := int64((32*12+196)*mib), int64((16*3*12+100)*mib)
	dense := func(tied bool) *core.Model {
		return &core.Model{Name: "m", Layers: []core.Layer{&nn.Embedding{Name: "embed", Rows: 256, Dim: 64},
			&core.Repeat{N: 4, Layer: &nn.MLP{Dim: 64, Hidden: 128, Act: "swiglu"}}},
			Vocab: 256, Loss: "cross_entropy", TieEmbeddings: tied}
	}
	cfg := []byte(`{"model_type": "deepseek_v3", "hidden_size": 64, "intermediate_size": 96, "moe_intermediate_size": 32,
		"num_hidden_layers": 4, "num_attention_heads": 4, "vocab_size": 100, "q_lora_rank": 32, "kv_lora_rank": 16,
		"qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8, "n_routed_experts": 8, "n_shared_experts": 1,
		"num_experts_per_tok": 2, "first_k_dense_replace": 1, "num_nextn_predict_layers": 1}`)
	deepseek := func(mtp bool) *core.Model {
		m, err := hf.FromConfigOptions(cfg, hf.Options{Attn: "flash", MTP: mtp})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	embd := func(b int64) map[string]int64 { return map[string]int64{"nccl_embd": b} }
	none := map[string]int64{}
	for _, tc := range []struct {
		name   string
		m      *core.Model
		pp, dp int64
		nodes  int64
		want   []map[string]int64 // per stage
	}{
		{"tied, pp 2", dense(true), 2, 4, 1, []map[string]int64{embd(ring8), embd(ring8)}},
		{"untied, pp 2", dense(false), 2, 4, 1, []map[string]int64{none, none}},
		{"tied, pp 4 on two nodes", dense(true), 4, 4, 2, []map[string]int64{embd(ringTree16), none, none, embd(ringTree16)}},
		{"mtp, pp 2", deepseek(true), 2, 4, 1, []map[string]int64{
			{"nccl_embd": ring8, "nccl_tp_dp_cp": ring8}, {"nccl_embd": ring8, "nccl_tp_dp_cp": ring8}}},
		{"no mtp, pp 2", deepseek(false), 2, 4, 1, []map[string]int64{{"nccl_tp_dp_cp": ring8}, {"nccl_tp_dp_cp": ring8}}},
	} {
		p := distPlan(t, tc.m, "megatron", core.Parallelism{DP: tc.dp, PP: tc.pp, DistributedOptimizer: true, MicroBatches: tc.pp})
		p.GradAccum = tc.pp
		p.Cluster = hw.Cluster{Nodes: tc.nodes, GPUsPerNode: 8}
		r := evalPlan(t, p)
		if len(r.Ranks) != len(tc.want) {
			t.Fatalf("%s: %d stages replayed, want %d", tc.name, len(r.Ranks), len(tc.want))
		}
		for i, s := range r.Ranks {
			got := map[string]int64{}
			for _, o := range s.Overheads {
				if o.Name == "nccl_embd" || o.Name == "nccl_tp_dp_cp" {
					got[o.Name] = o.Bytes
				}
			}
			if !maps.Equal(got, tc.want[i]) {
				t.Errorf("%s, stage %d: overheads %v, want %v", tc.name, i, got, tc.want[i])
			}
		}
	}
}
