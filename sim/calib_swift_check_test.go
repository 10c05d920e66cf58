package sim_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/memsh/memsh/builtins/plans"
	"github.com/memsh/memsh/importers"
	"github.com/memsh/memsh/lang"
	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// TestMegatronSwiftCheck is the differential test of memsh check's
// Megatron-SWIFT reader (importers/swift_megatron.go) against the
// calibration rows (calib_swift_moe_test.go): ms-swift v4.5.2's own
// example scripts that carry a row's figure (the same run, its arguments
// renamed for 4.x: --load -> --model, --save -> --output_dir, ...),
// read by memsh check on the rows' 8 A100-80GB, must give the plan the
// row replays, and the same device memory and step.
//
// What the command cannot say is the software the run had, which the
// row states and the reading of v4.5.2 leaves at memsh's defaults: torch
// 2.6 (runtime "cuda-2.6") with NCCL 2.21's eager connections, the A800's
// NVLink (200 GB/s a direction, not the A100's 300), and for runs on
// Megatron-Core before 0.13 its loss group (LossDPGroup) and unpermute
// (UnpermuteProbs). Each case sets those on the imported plan, each with
// its reason; everything else comes from the command.
func TestMegatronSwiftCheck(t *testing.T) {
	for _, tc := range []struct {
		row    string // TestMegatronSwiftCalibration's row
		script string // under importers/testdata/swift
		model  string // the model's config.json under testdata/hf
		nodes  int64  // the job's nodes (0: one)
		// release sets what the row's software says and the command does not
		release func(p *core.Plan)
		// overrides are memsh check's key=value settings: what a 3.x
		// script leaves to its mcore checkpoint (--load X-mcore names
		// no model) or to its cluster's environment
		overrides []string
	}{
		// moe/moe.sh at v4.5.2 is c3f3ca4a4's (ms-swift 3.7.0.dev0,
		// core_r0.13.0) with 4.x's names: "8 * 57GiB, 2.95s/it"
		{row: "Qwen1.5-MoE-A2.7B, pp 2, ep 4, dp 4", script: "megatron_moe.sh", model: "qwen1.5-moe-a2.7b.json"},
		// moe/deepseek_v3.sh at v4.5.2 is cecf735f1's (3.7.0.dev0,
		// core_r0.13.0): "8 * 60GiB; 9s/it"; the router's fp32 is
		// v4.5.2's default as it was 3.7's (ea23c5e9d)
		{row: "Moonlight-16B-A3B, pp 2, ep 4, dp 4", script: "megatron_deepseek_v3.sh", model: "moonlight-16b-a3b-instruct.json"},
		// base_to_chat.sh at v4.5.2 is 9d297f99a's with 4.x's names and
		// PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, which the
		// measured run did not set (added at 5df8180fd, no figure changed);
		// that run's Megatron-Core (before 0.13) all-reduced the loss over
		// a group of its own; --recompute_granularity selective, the row's
		{row: "Qwen2.5-14B, tp 4, dp 2", script: "megatron_base_to_chat.sh", model: "qwen2.5-14b.json",
			release: func(p *core.Plan) { p.ExpandableSegments = false; p.Parallel.LossDPGroup = true }},
		// ms-swift 3.x's own scripts of the other rows (--load X-mcore:
		// the model by model=), read under v4.5.2's defaults: what 3.x and
		// its Megatron-Core had otherwise is set with its reason.
		// moe/moe.sh at ea23c5e9d ("pp2ep4: 7 * 73GiB, 2.5s/it";
		// 3.6.0.dev0, core_r0.12.0: its loss group and unpermute); its
		// selective recompute as base_to_chat's above.
		{row: "Qwen1.5-MoE-A2.7B, pp 2, ep 4, dp 4, selective recompute", script: "megatron3_moe_pp2.sh", model: "qwen1.5-moe-a2.7b.json",
			overrides: []string{"model=Qwen/Qwen1.5-MoE-A2.7B"}, release: core012},
		// moe.sh at 8d95f8c9c ("8 * 65GiB", 3.4.0.dev0): no
		// expert_tensor_parallel_size argument, so Megatron's default, tp;
		// the row keeps June's fp32 router (calib_swift_moe_sources_test.go),
		// v4.5.2's default too, and June's permute fusion (the script has
		// no --moe_permute_fusion, v4.5.2's default false)
		{row: "Qwen1.5-MoE-A2.7B, tp 2, ep 4, dp 4, selective recompute", script: "megatron3_moe_tp2.sh", model: "qwen1.5-moe-a2.7b.json",
			overrides: []string{"model=Qwen/Qwen1.5-MoE-A2.7B"}, release: func(p *core.Plan) {
				core012(p)
				p.Parallel.ETP = p.Parallel.TP
				p.Parallel.NoPermuteFusion = false
			}},
		// qwen3_moe.sh at ad907793e (3.4.0.dev0, core_r0.11.0): expert tp
		// as above, no router dtype argument (Megatron's None: the input's
		// dtype); DLC's two nodes of 8 GPUs (the best practice's text; the
		// script's NNODES=$WORLD_SIZE is DLC's)
		{row: "Qwen3-30B-A3B, tp 2, ep 8, dp 8, two nodes", script: "megatron3_qwen3_moe.sh", model: "qwen3-30b-a3b.json", nodes: 2,
			overrides: []string{"model=Qwen/Qwen3-30B-A3B-Base", "env.NNODES=2", "env.NPROC_PER_NODE=8"},
			release: func(p *core.Plan) {
				core012(p)
				p.Parallel.ETP = p.Parallel.TP
				p.Parallel.RouterDType = units.InvalidDType
			}},
		// moe/deepseek_v3.sh at 9052fc057 ("8 * 56GiB", 3.6.0.dev0,
		// core_r0.12.0): expert tp as above, the router in bf16 (the row's
		// reading of that release's default)
		{row: "Moonlight-16B-A3B, tp 2, ep 4, dp 4", script: "megatron3_deepseek_v3_tp2.sh", model: "moonlight-16b-a3b-instruct.json",
			overrides: []string{"model=moonshotai/Moonlight-16B-A3B-Instruct"},
			release: func(p *core.Plan) {
				core012(p)
				p.Parallel.ETP = p.Parallel.TP
				p.Parallel.RouterDType = units.InvalidDType
			}},
	} {
		t.Run(tc.row, func(t *testing.T) {
			want := sim.MegatronSwiftRowPlan(t, tc.row)
			got := importedPlan(t, tc.script, tc.model, max(tc.nodes, 1), tc.overrides)
			rt, _ := core.LookupRuntime("cuda-2.6")
			got.Runtime = rt                        // torch 2.6 (calib_swift_moe_test.go)
			got.RuntimeMemory.NCCLConnect = "eager" // NCCL 2.21.5, torch 2.6's
			got.Device.LinkGBps = want.Device.LinkGBps
			if got.Device.Name != want.Device.Name {
				t.Fatalf("device %s, the row's %s", got.Device.Name, want.Device.Name)
			}
			if tc.release != nil {
				tc.release(got)
			}
			for _, c := range []struct {
				what      string
				got, want any
			}{
				{"batch", got.Batch, want.Batch}, {"seq", got.Seq, want.Seq}, {"checkpoint", got.Checkpoint.String(), want.Checkpoint.String()},
				{"precision", got.Precision.Name, want.Precision.Name}, {"expandable_segments", got.ExpandableSegments, want.ExpandableSegments},
				{"dataloader mask", got.DataloaderMask, want.DataloaderMask}, {"optimizer", got.Optimizer.Kind, want.Optimizer.Kind},
				{"dp", got.Parallel.DP, want.Parallel.DP}, {"tp", got.Parallel.TP, want.Parallel.TP}, {"pp", got.Parallel.PP, want.Parallel.PP},
				{"ep", got.Parallel.EP, want.Parallel.EP}, {"expert tp", got.Parallel.ETP, want.Parallel.ETP},
				{"sequence parallel", got.Parallel.SequenceParallel, want.Parallel.SequenceParallel},
				{"distributed optimizer", got.Parallel.DistributedOptimizer, want.Parallel.DistributedOptimizer},
				{"no overlapped reduce", got.Parallel.NoOverlapGradReduce, want.Parallel.NoOverlapGradReduce},
				{"no overlapped gather", got.Parallel.NoOverlapParamGather, want.Parallel.NoOverlapParamGather},
				{"shared expert overlap", got.Parallel.SharedExpertOverlap, want.Parallel.SharedExpertOverlap},
				{"router dtype", got.Parallel.RouterDType, want.Parallel.RouterDType}, {"loss", got.Parallel.LossParallel, want.Parallel.LossParallel},
				{"loss group", got.Parallel.LossDPGroup, want.Parallel.LossDPGroup}, {"unpermute probs", got.Parallel.UnpermuteProbs, want.Parallel.UnpermuteProbs},
				{"no permute fusion", got.Parallel.NoPermuteFusion, want.Parallel.NoPermuteFusion},
				{"cluster nodes", max(got.Cluster.Nodes, 1), max(want.Cluster.Nodes, 1)}, {"parameters", got.Model.Params(), want.Model.Params()},
			} {
				if c.got != c.want {
					t.Errorf("%s: memsh check reads %v, the row replays %v", c.what, c.got, c.want)
				}
			}
			rg, err := sim.Evaluate(got, core.Options{})
			if err != nil {
				t.Fatal(err)
			}
			rw, err := sim.Evaluate(want, core.Options{})
			if err != nil {
				t.Fatal(err)
			}
			g, w := sim.FullestGiB(rg), sim.FullestGiB(rw)
			t.Logf("memsh check: %.2f GiB, %.3f s; the row: %.2f GiB, %.3f s", g, rg.Time.StepSeconds, w, rw.Time.StepSeconds)
			if math.Abs(g-w) > 1e-9*w || math.Abs(rg.Time.StepSeconds-rw.Time.StepSeconds) > 1e-9*rw.Time.StepSeconds {
				t.Errorf("memsh check's plan replays %.4f GiB and %.4f s, the row's %.4f GiB and %.4f s", g, rg.Time.StepSeconds, w, rw.Time.StepSeconds)
			}
		})
	}
}

// core012 is what Megatron-Core before 0.13 ran as 0.13 does not: the
// loss all-reduced over a group of its own, the unpermute weighting and
// keeping the experts' outputs (calib_swift_moe_test.go).
func core012(p *core.Plan) { p.Parallel.LossDPGroup, p.Parallel.UnpermuteProbs = true, true }

// importedPlan is memsh check's plan of an ms-swift script on 8
// A100-80GB, the model's config.json handed as --model.
func importedPlan(t *testing.T, script, model string, nodes int64, overrides []string) *core.Plan {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "importers", "testdata", "swift", script))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join("testdata", "hf", model))
	if err != nil {
		t.Fatal(err)
	}
	res, err := importers.Import(script, data, importers.Options{GPU: "A100-80GB", GPUs: 8, Nodes: nodes, Model: "config.json", ModelData: cfg, Overrides: overrides})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	in := lang.New(lang.Options{Stdout: &out, Files: fstest.MapFS{"plan.star": {Data: []byte(res.Script)}, "config.json": {Data: cfg}}})
	defer in.Close()
	globals, err := in.RunFile(context.Background(), "plan.star")
	if err != nil {
		t.Fatalf("%v\n%s", err, res.Script)
	}
	p, ok := globals["plan"].(*plans.Plan)
	if !ok {
		t.Fatalf("the script's plan is %v", globals["plan"])
	}
	q := *p.SimPlan()
	return &q
}
