package core

import (
	"slices"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/units"
)

// TestMuonEmergingStepAsMeasured: the tensors alive at the peak of
// Megatron-LM's Muon step of one fp32 main matrix, as
// tools/oracle/muon_megatron_step.py measured them on the CPU (torch
// 2.15.0, emerging_optimizers fd77292's OrthogonalizedOptimizer.step and
// newton_schulz_tp on a one-rank gloo group, matmul precision "medium";
// the step after the first):
//
//	256 x 1024, partition_dim 0, 5 steps    3,670,016 B: empty_like and cat [256,1024] fp32, div fp32, _to_copy bf16
//	1024 x 256                               3,670,016 B: the same, the iterate transposed
//	512 x 512                                4,194,304 B: empty_like, cat fp32; _to_copy, mm, addmm, addmm [512,512] bf16
//	256 x 1024, --muon-nesterov              4,718,592 B: lerp [256,1024] fp32 more
//	384 x 640, 1 step                        3,538,944 B: 12 x 245,760 + 4 x 384^2
//	256 x 1024, no partition_dim (router)    3,145,728 B: _to_copy fp32 and both scalings' mul
//
// A fused QKV weight split per Q, K and V block (--muon-split-qkv, on by
// default) measured 5,505,024 B for 640 x 512 in two groups of [256, 32,
// 32] rows: its three fp32 copies and the Q block's peak; memsh steps the
// fused matrix whole (muon_megatron.go), 14 x 327,680 = 4,587,520 B.
func TestMuonEmergingStepAsMeasured(t *testing.T) {
	for _, c := range []struct {
		rows, cols int64
		role       Role
		nesterov   bool
		steps      int
		peak       int64
	}{
		{256, 1024, RoleUp, false, 5, 3_670_016},
		{1024, 256, RoleUp, false, 5, 3_670_016},
		{512, 512, RoleUp, false, 5, 4_194_304},
		{256, 1024, RoleUp, true, 5, 4_718_592},
		{384, 640, RoleUp, false, 1, 3_538_944},
		{256, 1024, RoleRouter, false, 5, 3_145_728},
	} {
		o := Optimizer{Kind: Muon, Momentum: 0.9, Nesterov: c.nesterov, NSSteps: c.steps, NS: MuonEmerging}
		p := &ParamInfo{Name: "w", Shape: []int64{c.rows, c.cols}, Numel: c.rows * c.cols, FullNumel: c.rows * c.cols, Role: c.role}
		if got := temporariesBytes(o.MuonStepTemporaries(p, units.FP32)); got != c.peak {
			t.Errorf("%d x %d %s nesterov=%v steps=%d: peak %d B, measured %d", c.rows, c.cols, c.role, c.nesterov, c.steps, got, c.peak)
		}
	}
}

// TestMuonEmergingTP: under tensor parallelism newton_schulz_tp's
// duplicated mode gathers the fp32 shards along partition_dim and
// orthogonalizes the whole matrix on every rank; blockwise keeps the
// shard. A column-parallel [256, 1024] shard of a [512, 1024] matrix
// (tp 2): 14 x 524,288 B (the gathered shards, their cat, F.normalize's
// fp32 output and its bf16 copy, all [512, 1024]; 12 x 524,288 + 4 x
// 512^2 is as much), Gram products of the whole matrix, 1 MiB received;
// a row-parallel [1024, 256] shard of a [1024, 512] one the same;
// blockwise 14 x 262,144 B and the shard's products.
func TestMuonEmergingTP(t *testing.T) {
	o := Optimizer{Kind: Muon, NSSteps: 5, NS: MuonEmerging}
	col := &ParamInfo{Shape: []int64{256, 1024}, Numel: 256 * 1024, FullNumel: 512 * 1024, Role: RoleUp}
	row := &ParamInfo{Shape: []int64{1024, 256}, Numel: 256 * 1024, FullNumel: 512 * 1024, Role: RoleDown}
	for _, p := range []*ParamInfo{col, row} {
		if got, want := temporariesBytes(o.MuonPieceTemporaries(p, p.Shape, 2)), int64(14*512*1024); got != want {
			t.Errorf("%s: duplicated peak %d B, want %d", p.Role, got, want)
		}
		if got, want := o.MuonGatherBytes(p, p.Shape, 2), int64(4*256*1024); got != want {
			t.Errorf("%s: gathered %d B, want %d", p.Role, got, want)
		}
	}
	if g := o.MuonEmergingGEMMs(col, col.Shape, 2); g[0] != [3]int64{512, 512, 1024} {
		t.Errorf("duplicated X @ X.T %v, want the whole matrix's [512 512 1024]", g[0])
	}
	if g := o.MuonEmergingGEMMs(row, row.Shape, 2); g[0] != [3]int64{512, 512, 1024} {
		t.Errorf("row-parallel X @ X.T %v, want [512 512 1024]", g[0])
	}
	b := o
	b.MuonTP = MuonBlockwise
	if got, want := temporariesBytes(b.MuonPieceTemporaries(col, col.Shape, 2)), int64(12*256*1024); got != want {
		t.Errorf("blockwise peak %d B, want %d (no gather: the scalings' three fp32 tensors)", got, want)
	}
	if b.MuonGatherBytes(col, col.Shape, 2) != 0 {
		t.Error("blockwise gathers nothing")
	}
	if g := b.MuonEmergingGEMMs(col, col.Shape, 2); g[0] != [3]int64{256, 256, 1024} {
		t.Errorf("blockwise X @ X.T %v, want the shard's [256 256 1024]", g[0])
	}
	// A grouped expert tensor is one matrix per expert (TEGroupedMLP).
	ex := &ParamInfo{Shape: []int64{4, 64, 32}, Numel: 4 * 64 * 32, FullNumel: 4 * 64 * 32, Role: "expert_up"}
	if !o.MuonMatrix(ex) || !slices.Equal(o.MuonMatrixShape(ex), []int64{64, 32}) {
		t.Errorf("a [4, 64, 32] expert tensor under Megatron: matrix %v of shape %v, want [64 32]", o.MuonMatrix(ex), o.MuonMatrixShape(ex))
	}
	// Expert parallelism shards the experts, not the matrices: an expert
	// tensor holding a quarter of the experts (FullNumel 4 x Numel) at
	// expert tp 1 is gathered as itself, [64, 32].
	ex4 := *ex
	ex4.FullNumel = 4 * ex.Numel
	if g := o.MuonEmergingGEMMs(&ex4, []int64{64, 32}, 1); g[0] != [3]int64{32, 32, 64} {
		t.Errorf("an ep 4 expert at expert tp 1: X @ X.T %v, want its own [32 32 64]", g[0])
	}
	plan := &Plan{Parallel: Parallelism{TP: 2, ETP: 1, EP: 4, DP: 4}}
	if n := plan.MuonTPRanks(&ex4); n != 1 {
		t.Errorf("expert_tp 1: gathered over %d ranks, want 1", n)
	}
	if n := plan.MuonTPRanks(col); n != 2 {
		t.Errorf("tp 2: a dense weight gathered over %d ranks, want 2", n)
	}
	torch := Optimizer{Kind: Muon, NSSteps: 5}
	if torch.MuonMatrix(ex) {
		t.Error("torch.optim.Muon refuses a 3-D tensor: the recipes step it with AdamW")
	}
	if n := len(o.MuonPieces([]ParamInfo{*ex}, []int32{0})); n != 4 {
		t.Errorf("%d pieces of a 4-expert tensor, want 4", n)
	}
}

// TestLayerWiseShards: _emit_bucket's placement by hand. Costs big x
// small^2: four [8, 8] (512 each) and two [16, 16] (4,096), dp 2: the
// large ones first, one a shard (pieces 2 and 4), then the small ones in
// their order to the shard of least cost, ties to the lower: pieces 0, 1,
// 3 and 5 to shards 0, 1, 0, 1. One [16, 16]
// among six [4, 4] (64 each), dp 2, cap 1.3 x 352 / 2 = 228.8 elements:
// the large one on shard 0 (256 elements, over the cap already: it goes
// to the shard of fewest elements, 0), every small one on shard 1 until
// its elements pass the cap (6 x 16 = 96: never).
func TestLayerWiseShards(t *testing.T) {
	m := func(n int64) MuonPiece { return MuonPiece{Shape: []int64{n, n}} }
	for _, c := range []struct {
		pieces []MuonPiece
		dp     int64
		want   []int64
	}{
		{[]MuonPiece{m(8), m(8), m(16), m(8), m(16), m(8)}, 2, []int64{0, 1, 0, 0, 1, 1}},
		{[]MuonPiece{m(4), m(4), m(4), m(16), m(4), m(4), m(4)}, 2, []int64{1, 1, 1, 0, 1, 1, 1}},
		{[]MuonPiece{m(4), m(4)}, 1, []int64{0, 0}},
	} {
		if got := LayerWiseShards(c.pieces, c.dp); !slices.Equal(got, c.want) {
			t.Errorf("%v dp %d: shards %v, want %v", c.pieces, c.dp, got, c.want)
		}
	}
}

// TestMuonMegatronRefusals: the settings Megatron-LM's Muon refuses or
// memsh does not model, each with its reason.
func TestMuonMegatronRefusals(t *testing.T) {
	megatron := Precision{Name: "megatron", Params: units.BF16, Compute: units.BF16, Grads: units.FP32, Master: units.FP32, States: units.FP32, Megatron: true}
	bf16 := Precision{Name: "bf16", Params: units.BF16, Compute: units.BF16, Grads: units.BF16, States: units.BF16}
	fp16 := megatron
	fp16.Params = units.FP16
	muon := Optimizer{Kind: Muon, Momentum: 0.9, NSSteps: 5}
	with := func(f func(*Optimizer)) Optimizer { o := muon; f(&o); return o }
	for _, c := range []struct {
		o    Optimizer
		prec Precision
		par  Parallelism
		want string
	}{
		{with(func(o *Optimizer) { o.NS = MuonEmerging }), bf16, Parallelism{}, `newton_schulz="emerging") is Megatron-LM's`},
		{with(func(o *Optimizer) { o.NS = MuonReference }), megatron, Parallelism{}, `"reference") under precision="megatron"`},
		{with(func(o *Optimizer) { o.MuonTP = "distributed" }), megatron, Parallelism{TP: 2}, "is not modelled"},
		{with(func(o *Optimizer) { o.MuonTP = MuonBlockwise }), bf16, Parallelism{}, "--muon-tp-mode"},
		{muon, fp16, Parallelism{}, "fp16 is not supported"},
		{muon, megatron, Parallelism{DP: 2, FSDP: true}, "muon() with fsdp="},
		{muon, bf16, Parallelism{TP: 2}, `precision=\"megatron\"`},
		{Optimizer{Kind: AdamW, MuonTP: MuonBlockwise}, megatron, Parallelism{}, "tp_mode are Muon's"},
	} {
		p := &Plan{Optimizer: c.o, Precision: c.prec, Parallel: c.par}
		err := p.validateMuonLayout()
		if err == nil {
			err = c.o.Validate()
		}
		if err == nil || !strings.Contains(units.Worded(err).Error()+hintOf(err), strings.ReplaceAll(c.want, `\"`, `"`)) {
			t.Errorf("%+v %s %+v: error %v, want %q", c.o, c.prec.Name, c.par, err, c.want)
		}
	}
	for _, par := range []Parallelism{{TP: 2, PP: 2, DP: 2}, {DP: 4, DistributedOptimizer: true}, {EP: 2, DP: 2}, {CP: 2}} {
		p := &Plan{Optimizer: muon, Precision: megatron, Parallel: par}
		if err := p.validateMuonLayout(); err != nil {
			t.Errorf("Megatron's Muon under %+v: %v", par, err)
		}
	}
}

func hintOf(err error) string {
	if e, ok := err.(*units.Error); ok {
		return " " + e.Hint
	}
	return ""
}
