package builtins

import (
	"strings"
	"testing"
)

const parallelPrelude = `
block = sequential(residual(sequential(rmsnorm(256), attention(256, heads = 8))), residual(sequential(rmsnorm(256), mlp(256, 1024, act = "swiglu"))))
m = model("small", embedding(1024, 256), repeat(block, 8), rmsnorm(256), vocab = 1024)
p = train(m, seq = 64, precision = "megatron")
`

func TestParallel(t *testing.T) {
	runPreludeCases(t, parallelPrelude, []evalCase{
		{expr: "parallel(dp = 8, zero = 3)", want: "parallel(dp=8, zero=3)"},
		{expr: "type(parallel(dp = 8))", want: `"parallel"`},
		{expr: "parallel(tp = 2, pp = 4, dp = 2).gpus", want: "16"},
		{expr: "parallel(dp = 8).tp", want: "1"},
		{expr: "parallel(dp = 8).micro_batches", want: "None"},
		{expr: `parallel(pp = 4, schedule = "interleaved", virtual_stages = 2, micro_batches = 8)`,
			want: `parallel(pp=4, schedule="interleaved", virtual_stages=2, micro_batches=8)`},
		{expr: "parallel(tp = 2, sequence_parallel = True, distributed_optimizer = True, dp = 4)",
			want: "parallel(dp=4, tp=2, sequence_parallel=True, distributed_optimizer=True)"},
		{expr: "parallel(dp = 4, distributed_optimizer = True, overlap_grad_reduce = False, overlap_param_gather = False)",
			want: "parallel(dp=4, distributed_optimizer=True, overlap_grad_reduce=False, overlap_param_gather=False)"},
		{expr: "[parallel(dp = 4, overlap_grad_reduce = False).overlap_grad_reduce, parallel(dp = 4).overlap_param_gather]", want: "[False, True]"},
		{expr: "p.replace(parallel = parallel(dp = 8, overlap_grad_reduce = False)).parallel", want: "parallel(dp=8, overlap_grad_reduce=False)"},
		{expr: "type(parallel(linear(4, 4), linear(4, 4)))", want: `"layer"`},
		{expr: "parallel(dp = 2, fsdp = 1)", want: "parallel(dp=2, fsdp=1)"},
		{expr: "parallel(dp = 2, fsdp = 1).fsdp", want: "1"},
		{expr: "parallel(dp = 2, fsdp = 1, fsdp_adapter_units = True)", want: "parallel(dp=2, fsdp=1, fsdp_adapter_units=True)"},
		{expr: "[parallel(dp = 2, fsdp = 1, fsdp_adapter_units = True).fsdp_adapter_units, parallel(dp = 2).fsdp_adapter_units]", want: "[True, False]"},
		{expr: "parallel(dp = 2, fsdp = True).fsdp", want: "True"},
		{expr: "cluster()", want: "cluster(nodes=1, gpus_per_node=8)"},
		{expr: "cluster(nodes = 2, gpus_per_node = 4, inter = 50).gpus", want: "8"},
		{expr: "cluster(inter = 50).inter", want: "50.0"},
		{expr: "cluster().intra", want: "None"},
		{expr: "p.replace(parallel = parallel(dp = 8)).parallel", want: "parallel(dp=8)"},
		{expr: "p.replace(parallel = parallel(dp = 8))",
			want: `train(model="small", batch=1, seq=64, precision="megatron", gpu="H100-80GB", parallel=parallel(dp=8))`},
		{expr: "len(simulate(p.replace(parallel = parallel(pp = 2, micro_batches = 4))).ranks)", want: "2"},
		{expr: `sorted(simulate(p.replace(parallel = parallel(tp = 2, dp = 2, distributed_optimizer = True))).collectives.keys())`,
			want: `["all_gather", "all_reduce", "reduce_scatter"]`},
		{expr: `[o.name for o in simulate(p.replace(parallel = parallel(tp = 2, dp = 4))).overheads]`,
			want: `["cuda_context", "nccl_tp", "nccl_dp", "nccl_world", "nccl_mp"]`}, // the default group; the gradient norm over tp x pp (replay/nccl_megatron.go)
		{expr: "simulate(p).collectives", want: "{}"},
	})
}

func TestParallelErrors(t *testing.T) {
	runPreludeCases(t, parallelPrelude, []evalCase{
		{expr: "parallel(dp = 0)", err: "dp must be at least 1 (got 0)"},
		{expr: "parallel(zero = 4)", err: "zero must be 0, 1, 2 or 3 (got 4)"},
		{expr: `parallel(schedule = "gpipe")`, err: `unknown schedule "gpipe" (known: 1f1b, interleaved, zb-h1, zb-v, dualpipe)`},
		{expr: `parallel(schedule = "interleaved")`, err: "the interleaved schedule needs virtual_stages >= 2"},
		{expr: "parallel(dp = 2, zero = 3, fsdp = True)", err: "fsdp=True and zero=3 are alternatives"},
		{expr: "parallel(dp = 2, fsdp = True, fsdp_adapter_units = True)", err: "fsdp_adapter_units= is peft's FSDP1 wrap policy"},
		{expr: "parallel(dp = 2, fsdp = 1, fsdp_adapter_units = 1)", err: "fsdp_adapter_units must be True or False (got int)"},
		{expr: "parallel(dp = 2, zero = 1, distributed_optimizer = True)", err: "cannot be combined with zero= or fsdp="},
		{expr: "parallel(dp = 2, zero = 1, overlap_grad_reduce = False)", err: "are Megatron's DDP flags; they cannot be combined with zero= or fsdp="},
		{expr: "parallel(dp = 2, overlap_param_gather = 0)", err: "overlap_param_gather must be True or False (got int)"},
		{expr: `train(m, seq = 64).replace(parallel = parallel(dp = 8, overlap_grad_reduce = False))`, err: "are Megatron's DDP flags"},
		{expr: "parallel(dp = 2, tp = 2, tpp = 2)", err: `unexpected keyword argument "tpp" (did you mean tp?)`},
		{expr: "parallel(dp = 2, fsdp = 1, sync_each_batch = True)", err: `unexpected keyword argument "sync_each_batch" (did you mean fsdp_sync_each_batch?)`},
		{expr: `parallel(dp = 2, fsdp = 1, dtype = "bf16")`, err: `unexpected keyword argument "dtype" (known: dp, tp,`},
		{expr: "parallel(dp = 2, zero = 3, fsdp_sync_each_batch = True)", err: "fsdp_sync_each_batch= is FSDP1's (FullyShardedDataParallel's no_sync()), and this layout has no fsdp="},
		{expr: "parallel()", err: "parallel needs at least one branch"},
		{expr: "parallel(dp = 2, fsdp = 3)", err: "fsdp must be True, False, 1 (FullyShardedDataParallel) or 2 (fully_shard) (got 3)"},
		{expr: "cluster(nodes = 0)", err: "nodes and gpus_per_node must be at least 1"},
		{expr: "cluster(intra = -1)", err: "intra must be a positive bandwidth in GB/s (got -1)"},
		{expr: "p.replace(parallel = parallel(tp = 3))", err: "tp=3 does not divide 8 attention heads"},
		{expr: "p.replace(parallel = parallel(dp = 4, tp = 2), cluster = cluster(nodes = 2))", err: "dp*tp*pp*cp = 8 but the cluster has 16 GPUs"},
		{expr: "p.replace(parallel = parallel(pp = 3))", err: "pp=3 does not divide 8 layers"},
		{expr: "p.replace(parallel = parallel(dp = 2, ep = 2))", err: "ep=2 but the model has no moe() layer"},
		{expr: "p.replace(cluster = 8)", err: "cluster must be None or cluster(nodes=..., gpus_per_node=...) (got int)"},
	})
}

// memsh doc's one-line summary of parallel names both of its uses, and
// its doc says what fsdp=1 (FSDP1) and fsdp=True (FSDP2) are.
func TestParallelDoc(t *testing.T) {
	b, ok := Lookup("parallel")
	if !ok {
		t.Fatal("no parallel builtin")
	}
	for _, want := range []string{"distributed layout", "parallel(dp=8, zero=3)", "feeds one input to every branch"} {
		if !strings.Contains(b.Summary(), want) {
			t.Errorf("parallel's summary %q lacks %q", b.Summary(), want)
		}
	}
	for _, want := range []string{"True or 2 is FSDP2", "1 is FSDP1 (FullyShardedDataParallel"} {
		if !strings.Contains(b.Doc, want) {
			t.Errorf("parallel's doc lacks %q", want)
		}
	}
}
