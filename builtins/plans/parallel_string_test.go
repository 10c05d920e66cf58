package plans

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// parallelSamples sets each layout keyword away from its default, with
// the other keywords it needs to be valid: the keyword's name to the
// parallel() call's arguments.
var parallelSamples = map[string]string{
	"dp":                                 `dp=4`,
	"tp":                                 `tp=2`,
	"pp":                                 `pp=2`,
	"cp":                                 `cp=2`,
	"ep":                                 `dp=4, ep=2`,
	"expert_tp":                          `dp=4, tp=2, ep=2, expert_tp=1, sequence_parallel=True`,
	"expert_load":                        `dp=4, ep=2, expert_load=1.5`,
	"expert_spread":                      `dp=4, ep=2, expert_spread=0.2`,
	"zero":                               `dp=4, zero=2`,
	"fsdp":                               `dp=4, fsdp=True`,
	"dp_replicate":                       `dp=8, fsdp=True, dp_replicate=2`,
	"reshard_after_forward":              `dp=4, fsdp=True, reshard_after_forward=False`,
	"fsdp_units":                         `dp=4, fsdp=True, fsdp_units=["model.embed_tokens"]`,
	"fsdp_adapter_units":                 `dp=4, fsdp=1, fsdp_adapter_units=True`,
	"fsdp_sync_each_batch":               `dp=4, fsdp=1, fsdp_sync_each_batch=True`,
	"fsdp_sync_module_states":            `dp=4, fsdp=1, fsdp_sync_module_states=True`,
	"fsdp_backward_prefetch":             `dp=4, fsdp=1, fsdp_backward_prefetch="post"`,
	"fsdp_forward_prefetch":              `dp=4, fsdp=1, fsdp_forward_prefetch=True`,
	"fsdp_no_sync":                       `dp=4, fsdp=True, fsdp_no_sync=True`,
	"param_dtype":                        `dp=4, fsdp=True, param_dtype="fp32"`,
	"reduce_dtype":                       `dp=4, fsdp=True, reduce_dtype="bf16"`,
	"cp_mode":                            `cp=2, cp_mode="ulysses"`,
	"loss_parallel":                      `tp=2, loss_parallel="torch"`,
	"pp_runtime":                         `pp=2, pp_runtime="torch"`,
	"tp_runtime":                         `tp=2, tp_runtime="torch"`,
	"sequence_parallel":                  `tp=2, sequence_parallel=True`,
	"schedule":                           `pp=2, schedule="zb-h1"`,
	"virtual_stages":                     `pp=2, virtual_stages=2`,
	"micro_batches":                      `pp=2, micro_batches=8`,
	"stage_layers":                       `pp=2, stage_layers=[3, 5]`,
	"first_stage_layers":                 `pp=3, first_stage_layers=2`,
	"last_stage_layers":                  `pp=3, last_stage_layers=2`,
	"account_for_embedding":              `pp=2, account_for_embedding=True`,
	"account_for_loss":                   `pp=2, account_for_loss=True`,
	"distributed_optimizer":              `dp=4, distributed_optimizer=True`,
	"overlap_grad_reduce":                `dp=4, distributed_optimizer=True, overlap_grad_reduce=False`,
	"overlap_param_gather":               `dp=4, distributed_optimizer=True, overlap_param_gather=False`,
	"overlap_comm":                       `dp=4, zero=2, overlap_comm=True`,
	"reduce_bucket_size":                 `dp=4, zero=2, reduce_bucket_size=1000`,
	"stage3_prefetch_bucket_size":        `dp=4, zero=3, stage3_prefetch_bucket_size=0`,
	"stage3_param_persistence_threshold": `dp=4, zero=3, stage3_param_persistence_threshold=10`,
	"stage3_max_live_parameters":         `dp=4, zero=3, stage3_max_live_parameters=0`,
	"async_tp_comm":                      `tp=2, async_tp_comm=False`,
	"tp_comm_overlap":                    `tp=2, sequence_parallel=True, tp_comm_overlap=True`,
	"async_tp":                           `tp=2, sequence_parallel=True, tp_runtime="torch", async_tp=True`,
	"loss_dp_group":                      `dp=4, loss_dp_group=True`,
	"grad_norm_group":                    `dp=4, grad_norm_group=True`,
	"unpermute_probs":                    `dp=4, ep=2, unpermute_probs=True`,
	"permute_fusion":                     `dp=4, ep=2, permute_fusion=False`,
	"shared_expert_overlap":              `dp=4, ep=2, shared_expert_overlap=True`,
	"router_dtype":                       `dp=4, ep=2, router_dtype="fp32"`,
}

// TestParallelStringIsTheCall checks, for every layout keyword, that a
// layout's str() is a parallel() call naming the keyword that builds the
// same layout again (the same once normalized, core.Parallelism.Norm, as
// String prints the normalized layout): what reports, advice and sweeps print can be pasted
// back into a script. A keyword added to layoutKeywords without a sample
// here fails.
func TestParallelStringIsTheCall(t *testing.T) {
	for _, k := range layoutKeywords {
		if _, ok := parallelSamples[k.Name]; !ok {
			t.Errorf("layout keyword %q has no sample in parallelSamples", k.Name)
		}
	}
	for name, args := range parallelSamples {
		t.Run(name, func(t *testing.T) {
			first := evalParallel(t, "parallel("+args+")")
			text := first.String()
			if !strings.Contains(text, name+"=") {
				t.Errorf("parallel(%s) prints %s: no %s", args, text, name)
			}
			again := evalParallel(t, text)
			if diff := cmp.Diff(first.P.Norm(), again.P.Norm()); diff != "" {
				t.Errorf("parallel(%s) prints %s, which builds another layout (-first +again):\n%s", args, text, diff)
			}
		})
	}
}

// evalParallel evaluates a parallel() call.
func evalParallel(t *testing.T, call string) Parallel {
	t.Helper()
	fn := starlark.NewBuiltin("parallel", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		return ParallelLayoutFn(b, kwargs)
	})
	v, err := starlark.EvalOptions(&syntax.FileOptions{}, &starlark.Thread{}, "sample", call, starlark.StringDict{"parallel": fn})
	if err != nil {
		t.Fatalf("%s: %v", call, err)
	}
	p, ok := v.(Parallel)
	if !ok {
		t.Fatalf("%s is a %s", call, v.Type())
	}
	return p
}
