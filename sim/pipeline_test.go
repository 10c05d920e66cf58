package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// gptStack is L GPT-2 blocks (the oracle's, eager attention) over a
// [b, s, h] input, without embedding or head: every block saves the same
// bytes, so pipeline stages can be compared block for block.
func gptStack(l int64) *core.Model {
	c := oracleCase{kind: "gpt2", h: 256, a: 4}
	return &core.Model{Name: "gpt", Layers: []core.Layer{&core.Repeat{Layer: oracleBlock(c), N: l}}, Loss: "none", InputDim: 256}
}

// TestPipelineInFlight checks Korthikanti et al. 2022 section 4.2.3: with
// 1F1B the first stage holds pp micro-batches of L/pp layers, the
// activations of all L layers whatever pp is; the interleaved schedule
// (Megatron's warm-up of (pp-1)*2 + (v-1)*pp chunk forwards, plus one)
// holds pp*v + pp - 1 chunks of L/(pp*v) layers: (1 + (pp-1)/(pp*v)) times
// as much. The last stage holds one micro-batch.
func TestPipelineInFlight(t *testing.T) {
	m := gptStack(8)
	one := evalPlan(t, distPlan(t, m, "bf16", core.Parallelism{}))
	perLayer := one.SavedActivations / 8
	if perLayer*8 != one.SavedActivations {
		t.Fatalf("saved activations %d are not 8 equal layers", one.SavedActivations)
	}
	for _, tc := range []struct {
		pp, v, m   int64
		firstChunk int64 // chunks in flight on stage 0
		lastChunks int64 // on the last stage
	}{
		{2, 1, 8, 2, 1},
		{4, 1, 8, 4, 1},
		{4, 1, 2, 2, 1}, // fewer micro-batches than stages: min(pp, m)
		{2, 2, 4, 2*2 + 2 - 1, 2 + 1},
		{4, 2, 8, 4*2 + 4 - 1, 4 + 1},
	} {
		par := core.Parallelism{PP: tc.pp, VirtualStages: tc.v, MicroBatches: tc.m}
		rep := evalPlan(t, distPlan(t, m, "bf16", par))
		if len(rep.Ranks) != int(tc.pp) {
			t.Fatalf("pp=%d: %d stage reports", tc.pp, len(rep.Ranks))
		}
		layers := 8 / (tc.pp * tc.v) // per chunk
		if got, want := rep.Ranks[0].SavedActivations, tc.firstChunk*layers*perLayer; got != want {
			t.Errorf("pp=%d v=%d m=%d: stage 0 saves %d, want %d chunks x %d layers = %d", tc.pp, tc.v, tc.m, got, tc.firstChunk, layers, want)
		}
		if got, want := rep.Ranks[tc.pp-1].SavedActivations, tc.lastChunks*layers*perLayer; got != want {
			t.Errorf("pp=%d v=%d m=%d: last stage saves %d, want %d", tc.pp, tc.v, tc.m, got, want)
		}
		if rep.DeviceUsed != rep.Ranks[0].DeviceUsed {
			t.Errorf("pp=%d: the report is not the first (fullest) stage", tc.pp)
		}
	}
}

// TestPipelineStageParams: stage 0 holds the embedding, the last stage the
// final norm and an untied copy of the output layer (Megatron keeps the
// word embeddings on both ends), every stage L/pp blocks.
func TestPipelineStageParams(t *testing.T) {
	block := oracleBlock(oracleCase{kind: "gpt2", h: 256, a: 4})
	m := &core.Model{Name: "gpt", Layers: []core.Layer{&nn.Embedding{Rows: 1024, Dim: 256}, &core.Repeat{Layer: block, N: 4}, &nn.Norm{Dim: 256, Bias: true}},
		Vocab: 1024, TieEmbeddings: true}
	for s, want := range []int64{1024*256 + 2*block.Params(), 2*block.Params() + 2*256 + 1024*256} {
		p := distPlan(t, m, "bf16", core.Parallelism{PP: 2, MicroBatches: 4})
		split, err := core.SplitStages(m, p.Parallel.Norm())
		if err != nil {
			t.Fatal(err)
		}
		p.PipeStage = &core.StageSpec{Stage: int64(s), Chunks: []int64{int64(s)}, Split: split}
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, pi := range prog.Params {
			if pi.TiedTo < 0 {
				n += pi.Numel
			}
		}
		if n != want {
			t.Errorf("stage %d: %d params, want %d", s, n, want)
		}
	}
}

// TestPipelineTiedTrainable: the last stage's copy of a tied embedding
// holds memory and trains there, but the report counts the model's
// parameters once: trainable equals the model's count for pp 1, 2 and 4
// (interleaved too), and the last stage's head weight is the flagged copy.
func TestPipelineTiedTrainable(t *testing.T) {
	block := oracleBlock(oracleCase{kind: "gpt2", h: 256, a: 4})
	m := &core.Model{Name: "gpt", Layers: []core.Layer{&nn.Embedding{Rows: 1024, Dim: 256}, &core.Repeat{Layer: block, N: 4}, &nn.Norm{Dim: 256, Bias: true}},
		Vocab: 1024, TieEmbeddings: true}
	for _, par := range []core.Parallelism{{}, {PP: 2, MicroBatches: 4}, {PP: 4, MicroBatches: 4}, {PP: 2, VirtualStages: 2, MicroBatches: 4}} {
		rep := evalPlan(t, distPlan(t, m, "bf16", par))
		if rep.TrainableParams != m.Params() {
			t.Errorf("pp=%d v=%d: %d trainable, want the model's %d", par.PP, par.VirtualStages, rep.TrainableParams, m.Params())
		}
	}
	p := distPlan(t, m, "bf16", core.Parallelism{PP: 2, MicroBatches: 4})
	split, err := core.SplitStages(m, p.Parallel.Norm())
	if err != nil {
		t.Fatal(err)
	}
	p.PipeStage = &core.StageSpec{Stage: 1, Chunks: []int64{1}, Split: split}
	prog, err := p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	var copies []string
	for _, pi := range prog.Params {
		if pi.StageCopy {
			copies = append(copies, pi.Name)
		}
	}
	if len(copies) != 1 || !strings.HasSuffix(copies[0], "lm_head.weight") {
		t.Errorf("last stage's copies %q, want the head weight alone", copies)
	}
}

// TestLayoutErrors: impossible layouts are errors naming the numbers.
func TestLayoutErrors(t *testing.T) {
	llama := &core.Model{Name: "m", Layers: []core.Layer{
		&nn.Embedding{Rows: 32256, Dim: 4096},
		&core.Repeat{N: 32, Layer: &core.Sequential{Layers: []core.Layer{
			&nn.Attention{Dim: 4096, Heads: 32, KVHeads: 8, Impl: "flash"},
			&nn.MoE{Dim: 4096, Hidden: 14336, Experts: 8, TopK: 2, Act: "swiglu"},
		}}},
	}, Vocab: 32256}
	for _, tc := range []struct {
		par     core.Parallelism
		cluster hw.Cluster
		want    string
	}{
		{core.Parallelism{TP: 3}, hw.Cluster{}, "tp=3 does not divide 32 attention heads"},
		{core.Parallelism{DP: 3, TP: 4}, hw.Cluster{Nodes: 2, GPUsPerNode: 8}, "dp*tp*pp*cp = 12 but the cluster has 16 GPUs"},
		{core.Parallelism{DP: 6, EP: 3}, hw.Cluster{}, "ep=3 does not divide 8 experts"},
		{core.Parallelism{DP: 4, EP: 3}, hw.Cluster{}, "ep=3 does not divide dp=4"},
		{core.Parallelism{TP: 5}, hw.Cluster{}, "tp=5 does not divide 32 attention heads"},
		{core.Parallelism{PP: 3}, hw.Cluster{}, "pp=3 does not divide 32 layers"},
		{core.Parallelism{PP: 4, VirtualStages: 3, MicroBatches: 8}, hw.Cluster{}, "pp*virtual_stages = 12 does not divide 32 layers"},
		{core.Parallelism{DP: 2, Zero: 4}, hw.Cluster{}, "zero must be 0, 1, 2 or 3 (got 4)"},
		{core.Parallelism{DP: 2, Zero: 3, FSDP: true}, hw.Cluster{}, "fsdp=True and zero=3 are alternatives"},
		{core.Parallelism{PP: 2, Zero: 3}, hw.Cluster{}, "zero=3 cannot be combined with pp=2"},
		{core.Parallelism{CP: 3}, hw.Cluster{}, "cp=3 does not divide seq 2048"},
		{core.Parallelism{Schedule: "gpipe"}, hw.Cluster{}, `unknown schedule "gpipe"`},
		{core.Parallelism{TP: -1}, hw.Cluster{}, "tp must be positive (got -1)"},
	} {
		p := distPlan(t, llama, "megatron", tc.par)
		p.Seq = 2048
		p.Cluster = tc.cluster
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.par, err, tc.want)
		}
	}
	off := distPlan(t, llama, "megatron", core.Parallelism{DP: 8, Zero: 3})
	off.Seq, off.Offload = 2048, &core.Offload{Optimizer: "nvme", Params: "nvme"}
	if err := off.Validate(); err != nil { // ZeRO-Infinity (replay/offload_nvme.go)
		t.Errorf("zero=3 with parameters and optimizer on NVMe: error %v", err)
	}
	gpt := &core.Model{Name: "gpt", Layers: []core.Layer{&nn.Embedding{Rows: 50257, Dim: 256}, &nn.Attention{Dim: 256, Heads: 8, Impl: "flash"}}, Vocab: 50257}
	err := distPlan(t, gpt, "megatron", core.Parallelism{TP: 2}).Validate()
	if want := "tp=2 does not divide the 50257 embedding rows (vocabulary)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("gpt tp=2: error %v, want %q", err, want)
	}
	if e, ok := err.(*units.Error); !ok || !strings.Contains(e.Hint, "50432") {
		t.Errorf("gpt tp=2: hint %q, want Megatron's padded vocabulary 50432", e.Hint)
	}
}

// TestExpertParallel: ep ranks each hold experts/ep experts; the routed
// tokens travel by all-to-all (dispatch and combine, forward and backward).
func TestExpertParallel(t *testing.T) {
	moe := &nn.MoE{Dim: 512, Hidden: 1024, Experts: 8, TopK: 2, Act: "swiglu"}
	m := &core.Model{Name: "moe", Layers: []core.Layer{&core.Repeat{N: 2, Layer: moe}}, Loss: "mse", InputDim: 512}
	expert := int64(3 * 512 * 1024)
	router := int64(512 * 8)
	for _, ep := range []int64{1, 2, 4, 8} {
		p := distPlan(t, m, "bf16", core.Parallelism{DP: 8, EP: ep})
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, pi := range prog.Params {
			n += pi.Numel
		}
		if want := 2 * (router + 8/ep*expert); n != want {
			t.Errorf("ep=%d: %d params on a rank, want %d", ep, n, want)
		}
		rep := evalPlan(t, p)
		var a2a int64
		for _, c := range rep.CommBytes {
			if c.Name == "all_to_all" {
				a2a = c.Bytes
			}
		}
		// 2 layers x (dispatch + combine) x (forward + backward) x T*k rows of 512 bf16.
		want := int64(0)
		if ep > 1 {
			want = 2 * 2 * 2 * (8 * 2) * 512 * 2
		}
		if a2a != want {
			t.Errorf("ep=%d: all_to_all %d bytes, want %d", ep, a2a, want)
		}
	}
}
