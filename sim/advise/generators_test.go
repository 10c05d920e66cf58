package advise

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/graph"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
)

// TestGenerators: the changes each knob offers, written as the train()
// keywords a user types.
func TestGenerators(t *testing.T) {
	with := func(f func(p *core.Plan)) *core.Plan {
		p := quickstart()
		f(p)
		return p
	}
	bris, err := testmodels.Bris(2, "stacked", 4, 1, core.Train)
	if err != nil {
		t.Fatal(err)
	}
	bris.Validation = true
	moe := quickstart()
	moe.Model = &core.Model{Name: "moe", Layers: []core.Layer{&core.Repeat{N: 4, Layer: &core.Sequential{Layers: []core.Layer{
		&nn.Attention{Dim: 512, Heads: 8, Impl: "flash", Causal: true},
		&nn.MoE{Dim: 512, Hidden: 1024, Experts: 8, TopK: 2, Act: "swiglu"}}}}}}
	moe.Parallel = core.Parallelism{DP: 2, TP: 2}
	moe.ExpandableSegments = true
	moe.Offload = &core.Offload{Activations: "cpu"}
	table := quickstart()
	table.Model = &core.Model{Name: "ngram", Vocab: 8000, Loss: "cross_entropy", Layers: []core.Layer{
		&nn.Embedding{Rows: 8000, Dim: 512},
		&core.Residual{Name: "memory", Layer: &replay.Table{Name: "ngram", Rows: 1 << 20, Dim: 32, Heads: 16, Grad: "sparse", PadRows: true}},
	}}
	quickstartChanges := map[string][]string{
		"compile":             {"compile=True"},
		"checkpoint":          {`checkpoint="selective"`, `checkpoint=checkpoint(every=2)`, `checkpoint="op"`, `checkpoint="full"`, `checkpoint=checkpoint(budget=81157 * MiB)`},
		"precision":           {`precision="bf16"`},
		"optimizer":           {`optimizer=adamw(impl="fused")`, `optimizer=adamw8bit()`, `optimizer=paged_adamw8bit()`, `optimizer=adamw(in_backward=True)`},
		"loss_chunks":         {`loss_chunks=8`},
		"offload":             {`offload=offload(optimizer="cpu"), parallel=parallel(zero=2)`, `offload=offload(optimizer="cpu", params="cpu"), parallel=parallel(zero=3)`, `offload=offload(activations="cpu")`},
		"expandable_segments": {`expandable_segments=True`},
	}
	// plus is want with one knob's changes more.
	plus := func(want map[string][]string, knob string, changes ...string) map[string][]string {
		out := maps.Clone(want)
		out[knob] = changes
		return out
	}
	for _, c := range []struct {
		name string
		plan *core.Plan
		goal Goal
		want map[string][]string // knob -> changes
	}{
		{"quickstart", quickstart(), Fit, quickstartChanges},
		{"grpo with vllm colocated", with(func(p *core.Plan) {
			p.Preference = &core.Preference{Loss: core.LossGRPO, TRL: core.TRLFusedHead, Reference: core.RefNone,
				GRPOConfig: core.GRPOConfig{Completion: 1024, VLLM: core.VLLMColocate, VLLMMemory: 0.3}}
		}), Fit, plus(quickstartChanges, "vllm_sleep",
			`preference=grpo(completion=1024, beta=0.0, vllm="colocate", vllm_memory=0.3, sleep=True, trl="1.15")`)},
		{"batch 12, full checkpointing, for speed", with(func(p *core.Plan) {
			p.Batch, p.GradAccum, p.Checkpoint = 12, 4, core.Checkpoint{Mode: "full", Every: 1, Reentrant: true}
			p.Optimizer.Impl = "fused"
		}), Speed, map[string][]string{
			"compile":             {"compile=True"},
			"micro_batch":         {"batch=6, grad_accum=8", "batch=3, grad_accum=16", "batch=1, grad_accum=48", "batch=24, grad_accum=2", "batch=48, grad_accum=1"},
			"checkpoint":          {`checkpoint="full"`, `checkpoint="none"`, `checkpoint="selective"`, `checkpoint=checkpoint(every=2)`, `checkpoint="op"`, `checkpoint=checkpoint(budget=81157 * MiB)`},
			"precision":           {`precision="bf16"`},
			"optimizer":           {`optimizer=adamw8bit()`, `optimizer=paged_adamw8bit()`},
			"loss_chunks":         {`loss_chunks=8`},
			"offload":             {`offload=offload(optimizer="cpu"), parallel=parallel(zero=2)`, `offload=offload(optimizer="cpu", params="cpu"), parallel=parallel(zero=3)`, `offload=offload(activations="cpu")`},
			"expandable_segments": {`expandable_segments=True`},
		}},
		{"fp32 on a V100, 8 GPUs", with(func(p *core.Plan) {
			p.Precision, _ = core.LookupPrecision("fp32")
			p.Device, _ = hw.LookupDevice("V100-32GB")
			p.Parallel = core.Parallelism{DP: 8}
			p.ExpandableSegments = true
			p.Offload = &core.Offload{Activations: "cpu"}
		}), Fit, map[string][]string{
			"compile":     {"compile=True"},
			"checkpoint":  {`checkpoint="selective"`, `checkpoint=checkpoint(every=2)`, `checkpoint="op"`, `checkpoint="full"`, `checkpoint=checkpoint(budget=32502 * MiB)`},
			"precision":   {`precision="fp16-mixed"`, `precision="fp16"`},
			"optimizer":   {`optimizer=adamw(impl="fused")`, `optimizer=adamw8bit()`, `optimizer=paged_adamw8bit()`, `optimizer=adamw(in_backward=True)`},
			"loss_chunks": {`loss_chunks=8`},
			"sharding": {`parallel=parallel(dp=8, zero=1)`, `parallel=parallel(dp=8, zero=2)`, `parallel=parallel(dp=8, zero=3)`,
				`parallel=parallel(dp=8, fsdp=True)`},
			"offload": {`offload=offload(optimizer="cpu", activations="cpu"), parallel=parallel(dp=8, zero=2)`, `offload=offload(optimizer="cpu", params="cpu", activations="cpu"), parallel=parallel(dp=8, zero=3)`},
			"layout": {`parallel=parallel(dp=4, tp=2, sequence_parallel=True), grad_accum=2`, `parallel=parallel(dp=2, tp=4, sequence_parallel=True), grad_accum=4`,
				`parallel=parallel(tp=8, sequence_parallel=True), grad_accum=8`, `parallel=parallel(dp=4, pp=2), grad_accum=2`, `parallel=parallel(dp=2, pp=4), grad_accum=4`},
		}},
		{"ZeRO-1 with overlap_comm on 8 GPUs: zero=3 drops it (ZeRO-3 overlaps always)", with(func(p *core.Plan) {
			p.Parallel = core.Parallelism{DP: 8, Zero: 1, OverlapComm: true}
		}), Fit, map[string][]string{
			"compile":             {"compile=True"},
			"checkpoint":          {`checkpoint="selective"`, `checkpoint=checkpoint(every=2)`, `checkpoint="op"`, `checkpoint="full"`, `checkpoint=checkpoint(budget=81157 * MiB)`},
			"expandable_segments": {"expandable_segments=True"},
			"precision":           {`precision="bf16"`},
			"optimizer":           {`optimizer=adamw(impl="fused")`, `optimizer=adamw8bit()`, `optimizer=paged_adamw8bit()`, `optimizer=adamw(in_backward=True)`},
			"loss_chunks":         {`loss_chunks=8`},
			"sharding": {`parallel=parallel(dp=8, zero=1, overlap_comm=True, reduce_bucket_size="auto")`, `parallel=parallel(dp=8, zero=2, overlap_comm=True)`,
				`parallel=parallel(dp=8, zero=3)`},
			"offload": {`offload=offload(optimizer="cpu")`, `offload=offload(optimizer="cpu", params="cpu"), parallel=parallel(dp=8, zero=3)`, `offload=offload(activations="cpu")`},
			"layout": {`parallel=parallel(dp=4, tp=2, zero=1, sequence_parallel=True, overlap_comm=True), grad_accum=2`,
				`parallel=parallel(dp=2, tp=4, zero=1, sequence_parallel=True, overlap_comm=True), grad_accum=4`,
				`parallel=parallel(tp=8, zero=1, sequence_parallel=True, overlap_comm=True), grad_accum=8`,
				`parallel=parallel(dp=4, pp=2, zero=1, overlap_comm=True), grad_accum=2`, `parallel=parallel(dp=2, pp=4, zero=1, overlap_comm=True), grad_accum=4`},
		}},
		{"FSDP without resharding, HSDP", with(func(p *core.Plan) {
			p.Parallel = core.Parallelism{DP: 16, FSDP: true, DPReplicate: 2, NoReshard: true}
			p.ExpandableSegments = true
		}), Fit, map[string][]string{
			"compile":     {"compile=True"},
			"checkpoint":  {`checkpoint="selective"`, `checkpoint=checkpoint(every=2)`, `checkpoint="op"`, `checkpoint="full"`, `checkpoint=checkpoint(budget=81157 * MiB)`},
			"precision":   {`precision="bf16"`},
			"optimizer":   {`optimizer=adamw(impl="fused")`, `optimizer=adamw8bit()`, `optimizer=paged_adamw8bit()`, `optimizer=adamw(in_backward=True)`},
			"loss_chunks": {`loss_chunks=8`},
			"sharding": {`parallel=parallel(dp=16, fsdp=True, dp_replicate=2)`,
				`parallel=parallel(dp=16, fsdp=True, reshard_after_forward=False)`},
			"offload": {`offload=offload(params="cpu")`, `offload=offload(activations="cpu")`},
			"layout": {`parallel=parallel(dp=8, tp=2, fsdp=True, dp_replicate=2, reshard_after_forward=False, sequence_parallel=True), grad_accum=2`,
				`parallel=parallel(dp=4, tp=4, fsdp=True, dp_replicate=2, reshard_after_forward=False, sequence_parallel=True), grad_accum=4`,
				`parallel=parallel(dp=2, tp=8, fsdp=True, dp_replicate=2, reshard_after_forward=False, sequence_parallel=True), grad_accum=8`,
				`parallel=parallel(dp=8, pp=2, fsdp=True, dp_replicate=2, reshard_after_forward=False), grad_accum=2`,
				`parallel=parallel(dp=4, pp=4, fsdp=True, dp_replicate=2, reshard_after_forward=False), grad_accum=4`},
		}},
		{"FSDP, for speed", with(func(p *core.Plan) { p.Parallel = core.Parallelism{DP: 8, FSDP: true} }), Speed, map[string][]string{
			"compile":             {"compile=True"},
			"checkpoint":          {`checkpoint="selective"`, `checkpoint=checkpoint(every=2)`, `checkpoint="op"`, `checkpoint="full"`, `checkpoint=checkpoint(budget=81157 * MiB)`},
			"precision":           {`precision="bf16"`},
			"optimizer":           {`optimizer=adamw(impl="fused")`, `optimizer=adamw8bit()`, `optimizer=paged_adamw8bit()`, `optimizer=adamw(in_backward=True)`},
			"loss_chunks":         {`loss_chunks=8`},
			"offload":             {`offload=offload(params="cpu")`, `offload=offload(activations="cpu")`},
			"expandable_segments": {`expandable_segments=True`},
			"sharding":            {`parallel=parallel(dp=8, fsdp=True, reshard_after_forward=False)`},
			"layout": {`parallel=parallel(dp=4, tp=2, fsdp=True, sequence_parallel=True), grad_accum=2`, `parallel=parallel(dp=2, tp=4, fsdp=True, sequence_parallel=True), grad_accum=4`,
				`parallel=parallel(tp=8, fsdp=True, sequence_parallel=True), grad_accum=8`, `parallel=parallel(dp=4, pp=2, fsdp=True), grad_accum=2`, `parallel=parallel(dp=2, pp=4, fsdp=True), grad_accum=4`},
		}},
		{"a pipeline, for speed", with(func(p *core.Plan) {
			p.Parallel, p.GradAccum, p.Checkpoint = core.Parallelism{PP: 4}, 8, core.Checkpoint{Mode: "full", Every: 1}
			p.ExpandableSegments = true
		}), Speed, map[string][]string{
			"compile":     {"compile=True"},
			"checkpoint":  {`checkpoint="none"`, `checkpoint="selective"`, `checkpoint=checkpoint(every=2)`, `checkpoint="op"`},
			"precision":   {`precision="bf16"`},
			"optimizer":   {`optimizer=adamw(impl="fused")`, `optimizer=adamw8bit()`, `optimizer=paged_adamw8bit()`},
			"loss_chunks": {`loss_chunks=8`},
			"micro_batch": {"batch=2, grad_accum=4", "batch=4, grad_accum=2", "batch=8, grad_accum=1"},
			"offload":     {`offload=offload(optimizer="cpu"), parallel=parallel(pp=4, zero=1)`, `offload=offload(activations="cpu")`},
			"layout":      {`parallel=parallel(dp=2, pp=2), grad_accum=4`},
			"schedule": {`parallel=parallel(pp=4, schedule="zb-h1")`, `parallel=parallel(pp=4, schedule="zb-v", virtual_stages=2)`,
				`parallel=parallel(pp=4, schedule="interleaved", virtual_stages=2)`, `parallel=parallel(pp=4, schedule="dualpipe")`},
		}},
		{"context parallelism", with(func(p *core.Plan) {
			p.Parallel = core.Parallelism{CP: 2, FSDP: true}
			p.ExpandableSegments = true
			p.Checkpoint = core.Checkpoint{Mode: "full", Every: 1}
		}), Fit, map[string][]string{
			"compile":     {"compile=True"},
			"optimizer":   {`optimizer=adamw(impl="fused")`, `optimizer=adamw8bit()`, `optimizer=paged_adamw8bit()`, `optimizer=adamw(in_backward=True)`},
			"precision":   {`precision="bf16"`},
			"loss_chunks": {`loss_chunks=8`},
			"offload":     {`offload=offload(params="cpu")`, `offload=offload(activations="cpu")`},
			"checkpoint":  {`checkpoint=checkpoint(budget=81157 * MiB)`},
			"cp_mode":     {`parallel=parallel(cp=2, fsdp=True, cp_mode="ulysses")`},
		}},
		{"a MoE over tensor parallelism", moe, Fit, map[string][]string{
			"compile":    {"compile=True"},
			"optimizer":  {`optimizer=adamw(impl="fused")`, `optimizer=adamw8bit()`, `optimizer=paged_adamw8bit()`, `optimizer=adamw(in_backward=True)`},
			"precision":  {`precision="bf16"`},
			"checkpoint": {`checkpoint="selective"`, `checkpoint=checkpoint(every=2)`, `checkpoint="op"`, `checkpoint="full"`, `checkpoint=checkpoint(budget=81157 * MiB)`},
			"sharding": {`parallel=parallel(dp=2, tp=2, zero=1)`, `parallel=parallel(dp=2, tp=2, zero=2)`, `parallel=parallel(dp=2, tp=2, zero=3)`,
				`parallel=parallel(dp=2, tp=2, fsdp=True)`},
			"offload":   {`offload=offload(optimizer="cpu", activations="cpu"), parallel=parallel(dp=2, tp=2, zero=2)`, `offload=offload(optimizer="cpu", params="cpu", activations="cpu"), parallel=parallel(dp=2, tp=2, zero=3)`},
			"layout":    {`parallel=parallel(tp=4, sequence_parallel=True), grad_accum=2`, `parallel=parallel(tp=2, pp=2, sequence_parallel=True), grad_accum=2`},
			"expert_tp": {`parallel=parallel(dp=2, tp=2, sequence_parallel=True, expert_tp=1)`},
		}},
		{"bris, 2 stacked members, validation", bris, Fit, map[string][]string{
			"checkpoint":   {`checkpoint="selective"`},
			"optimizer":    {`optimizer=adamw(impl="fused")`, `optimizer=adamw8bit()`, `optimizer=paged_adamw8bit()`, `optimizer=adamw(in_backward=True)`},
			"members_mode": {`members_mode="sequential"`},
			"eval_chunks of encoder, decoder": {"encoder, decoder: eval_chunks=2", "encoder, decoder: eval_chunks=4", "encoder, decoder: eval_chunks=8",
				"encoder, decoder: eval_chunks=16", "encoder, decoder: eval_chunks=32", "encoder, decoder: eval_chunks=64"},
			"chunks of encoder, decoder": {"encoder, decoder: chunks=8", "encoder, decoder: chunks=16", "encoder, decoder: chunks=32", "encoder, decoder: chunks=64"},
			"eval_chunks of processor": {"processor: eval_chunks=2", "processor: eval_chunks=4", "processor: eval_chunks=8",
				"processor: eval_chunks=16", "processor: eval_chunks=32", "processor: eval_chunks=64"},
			"segments of processor": {"processor: segments=8", "processor: segments=16"},
			"offload":               {`offload=offload(optimizer="cpu"), parallel=parallel(zero=2)`, `offload=offload(optimizer="cpu", params="cpu"), parallel=parallel(zero=3)`, `offload=offload(activations="cpu")`},
		}},
		{"PEFT LoRA on a bf16 model", with(func(p *core.Plan) {
			p.Precision, _ = core.LookupPrecision("bf16")
			p.LoRA = &core.LoRA{Rank: 16, Alpha: 32, Targets: []string{"all-linear"}}
		}), Fit, map[string][]string{
			"compile":             {"compile=True"},
			"checkpoint":          {`checkpoint="selective"`, `checkpoint=checkpoint(every=2)`, `checkpoint="op"`, `checkpoint="full"`, `checkpoint=checkpoint(budget=81157 * MiB)`},
			"adapter_dtype":       {`lora=lora(rank=16, alpha=32, targets=["all-linear"], autocast_adapter_dtype=False)`},
			"optimizer":           {`optimizer=adamw(impl="fused")`, `optimizer=adamw8bit()`, `optimizer=paged_adamw8bit()`, `optimizer=adamw(in_backward=True)`},
			"loss_chunks":         {`loss_chunks=8`},
			"offload":             {`offload=offload(optimizer="cpu"), parallel=parallel(zero=2)`, `offload=offload(optimizer="cpu", params="cpu"), parallel=parallel(zero=3)`, `offload=offload(activations="cpu")`},
			"expandable_segments": {`expandable_segments=True`},
		}},
		{"a sparse table on the card", table, Fit, map[string][]string{
			"checkpoint":          {`checkpoint="selective"`},
			"precision":           {`precision="bf16"`},
			"optimizer":           {`optimizer=adamw(impl="fused")`, `optimizer=adamw8bit()`, `optimizer=paged_adamw8bit()`, `optimizer=adamw(in_backward=True)`},
			"loss_chunks":         {`loss_chunks=8`},
			"offload":             {`offload=offload(optimizer="cpu"), parallel=parallel(zero=2)`, `offload=offload(optimizer="cpu", params="cpu"), parallel=parallel(zero=3)`, `offload=offload(activations="cpu")`},
			"expandable_segments": {`expandable_segments=True`},
			"placement of ngram":  {`ngram: placement="host"`},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := map[string][]string{}
			for _, g := range generators {
				for _, ch := range g.Gen(c.plan, Ask{Goal: c.goal, Budget: c.plan.Device.Memory}) {
					if !strings.HasPrefix(ch.Knob, g.Knob) && g.Knob != "graph" && g.Knob != "table_placement" {
						t.Errorf("generator %s made a change of knob %s", g.Knob, ch.Knob)
					}
					got[ch.Knob] = append(got[ch.Knob], ch.String())
					q, err := ch.Apply(c.plan)
					if err != nil {
						t.Errorf("%s: %v", ch, err)
						continue
					}
					if globalBatch(q) != globalBatch(c.plan) {
						t.Errorf("%s: the global batch changes from %d to %d: step times would not compare", ch, globalBatch(c.plan), globalBatch(q))
					}
				}
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("changes (-want +got):\n%s", d)
			}
		})
	}
}

// TestModelChangesCopy: a change to a layer's settings edits a copy of
// the model, which then has the new value; the plan's model is left as it
// is.
func TestModelChangesCopy(t *testing.T) {
	p, err := testmodels.Bris(2, "stacked", 4, 1, core.Train)
	if err != nil {
		t.Fatal(err)
	}
	p.Validation = true
	settings := func(m *core.Model) string { return fmt.Sprint(graph.Settings(m)) }
	before := settings(p.Model)
	changes := graphChanges(p, Ask{Goal: Fit})
	if len(changes) == 0 {
		t.Fatal("no changes")
	}
	for _, ch := range changes {
		q, err := ch.Apply(p)
		if err != nil {
			t.Fatal(err)
		}
		text := ch.Settings[0].Value.(ModelChange).Text
		layers, arg, _ := strings.Cut(text, ": ")
		name, value, _ := strings.Cut(arg, "=")
		found := false
		for _, s := range graph.Settings(q.Model) {
			if s.Layers == layers && s.Name == name {
				found = fmt.Sprint(s.Value) == value
			}
		}
		if !found || q.Model == p.Model {
			t.Errorf("%s: the copy has %s", ch, settings(q.Model))
		}
	}
	if settings(p.Model) != before {
		t.Errorf("the plan's model changed: %s", settings(p.Model))
	}
}

// globalBatch is the samples of one optimizer step over all replicas.
func globalBatch(p *core.Plan) int64 {
	return p.Batch * p.GradAccum * p.Parallel.Norm().DP
}

// The offload changes offered to each sharding mode are ones its plan
// validates: no parameter offload under a pipeline without FSDP
// (DeepSpeed's ZeRO-3 takes none); FSDP1 (CPUOffload), FSDP2
// (CPUOffloadPolicy) and ZeRO get it.
func TestOffloadChangesValidate(t *testing.T) {
	for _, c := range []struct {
		par    core.Parallelism
		params bool // offered offload(params="cpu")
	}{
		{core.Parallelism{DP: 8, FSDP: true, FSDPVersion: 1}, true},
		{core.Parallelism{DP: 8, FSDP: true}, true},
		{core.Parallelism{DP: 8, Zero: 2}, true},
		{core.Parallelism{DP: 2, PP: 4}, false},
		{core.Parallelism{DP: 1}, true},
	} {
		p := quickstart()
		p.Parallel = c.par
		params := false
		for _, ch := range offloadChanges(p, Ask{Goal: Fit, Budget: p.Device.Memory}) {
			q, err := ch.Apply(p)
			if err != nil {
				t.Errorf("%s, %s: %v", c.par, ch, err)
				continue
			}
			if err := q.Validate(); err != nil {
				t.Errorf("%s: %s is refused: %v", c.par, ch, err)
			}
			params = params || (q.Offload != nil && q.Offload.Params == "cpu")
		}
		if params != c.params {
			t.Errorf("%s: parameter offload offered %v, want %v", c.par, params, c.params)
		}
	}
}

// Short of host memory, the offload knob offers ZeRO-Infinity's NVMe tier
// for what the plan keeps on the host, at ZeRO-3 only (DeepSpeed's NVMe
// offload takes stage 3): optimizer and parameters on the CPU give three
// changes (either or both to NVMe), each valid; the optimizer alone on the
// CPU one; FSDP and ZeRO-2 none; nor when the host is not short.
func TestOffloadChangesNVMe(t *testing.T) {
	for _, c := range []struct {
		name  string
		par   core.Parallelism
		off   core.Offload
		short bool
		want  []core.Offload
	}{
		{"zero3, both on the host", core.Parallelism{DP: 8, Zero: 3}, core.Offload{Optimizer: "cpu", Params: "cpu"}, true,
			[]core.Offload{{Optimizer: "nvme", Params: "cpu"}, {Optimizer: "cpu", Params: "nvme"}, {Optimizer: "nvme", Params: "nvme"}}},
		{"zero3, the optimizer on the host", core.Parallelism{DP: 8, Zero: 3}, core.Offload{Optimizer: "cpu"}, true,
			[]core.Offload{{Optimizer: "nvme"}}},
		{"zero3, the host not short", core.Parallelism{DP: 8, Zero: 3}, core.Offload{Optimizer: "cpu", Params: "cpu"}, false, nil},
		{"zero2", core.Parallelism{DP: 8, Zero: 2}, core.Offload{Optimizer: "cpu"}, true, nil},
		{"fsdp", core.Parallelism{DP: 8, FSDP: true}, core.Offload{Params: "cpu"}, true, nil},
	} {
		p := quickstart()
		p.Parallel, p.Offload = c.par, &c.off
		var got []core.Offload
		for _, ch := range offloadChanges(p, Ask{Goal: Fit, Budget: p.Device.Memory, HostShort: c.short}) {
			q, err := ch.Apply(p)
			if err != nil {
				t.Fatalf("%s, %s: %v", c.name, ch, err)
			}
			if o := q.Offload; o != nil && (o.Optimizer == "nvme" || o.Params == "nvme") {
				if err := q.Validate(); err != nil {
					t.Errorf("%s: %s is refused: %v", c.name, ch, err)
				}
				got = append(got, *o)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: NVMe changes %+v, want %+v", c.name, got, c.want)
		}
	}
}

// An offload is taken back for speed, or when the plan falls short of
// host memory, never to make a plan fit the GPU (the GPU then holds
// more): DeepSpeed each tier alone, both, and NVMe back to the host;
// FSDP (1 and 2) its parameters, gradients and optimizer together, the
// only offload it has (core/offload.go); offloaded activations alone and
// with the rest. Each change is one train() takes (Validate).
func TestOffloadDrops(t *testing.T) {
	none := core.Offload{}
	for _, c := range []struct {
		name string
		par  core.Parallelism
		off  core.Offload
		want []core.Offload
	}{
		{"zero3, the optimizer on the host", core.Parallelism{DP: 8, Zero: 3}, core.Offload{Optimizer: "cpu"}, []core.Offload{none}},
		{"zero3, both on the host", core.Parallelism{DP: 8, Zero: 3}, core.Offload{Optimizer: "cpu", Params: "cpu"},
			[]core.Offload{{Params: "cpu"}, {Optimizer: "cpu"}, none}},
		{"zero3, the optimizer on NVMe", core.Parallelism{DP: 8, Zero: 3}, core.Offload{Optimizer: "nvme"},
			[]core.Offload{none, {Optimizer: "cpu"}}},
		{"zero3, both on NVMe", core.Parallelism{DP: 8, Zero: 3}, core.Offload{Optimizer: "nvme", Params: "nvme"},
			[]core.Offload{{Params: "nvme"}, {Optimizer: "nvme"}, none, {Optimizer: "cpu", Params: "nvme"}, {Optimizer: "nvme", Params: "cpu"}, {Optimizer: "cpu", Params: "cpu"}}},
		{"zero2, the optimizer and activations on the host", core.Parallelism{DP: 8, Zero: 2}, core.Offload{Optimizer: "cpu", Activations: "cpu", SyncCopies: true},
			[]core.Offload{{Activations: "cpu", SyncCopies: true}, {Optimizer: "cpu"}, none}},
		{"fsdp2 CPUOffloadPolicy", core.Parallelism{DP: 8, FSDP: true}, core.Offload{Params: "cpu"}, []core.Offload{none}},
		{"fsdp1 CPUOffload", core.Parallelism{DP: 8, FSDP: true, FSDPVersion: 1}, core.Offload{Params: "cpu", Optimizer: "cpu"}, []core.Offload{none}},
		{"activations only", core.Parallelism{}, core.Offload{Activations: "cpu"}, []core.Offload{none}},
	} {
		p := quickstart()
		p.Parallel, p.Offload = c.par, &c.off
		if err := p.Validate(); err != nil {
			t.Fatalf("%s: the plan is refused: %v", c.name, err)
		}
		drops := func(ask Ask) []core.Offload {
			var got []core.Offload
			for _, ch := range offloadChanges(p, ask) {
				q, err := ch.Apply(p)
				if err != nil {
					t.Fatalf("%s, %s: %v", c.name, ch, err)
				}
				o := core.Offload{}
				if q.Offload != nil {
					o = *q.Offload
				}
				if !tierTakenBack(c.off, o) {
					continue
				}
				if err := q.Validate(); err != nil {
					t.Errorf("%s: %s is refused: %v", c.name, ch, err)
				}
				if o == none && (q.Offload != nil || ch.String() != "offload=None") {
					t.Errorf("%s: %s leaves offload %+v, want None", c.name, ch, q.Offload)
				}
				got = append(got, o)
			}
			return got
		}
		for _, ask := range []Ask{{Goal: Speed}, {Goal: Fit, HostShort: true}} {
			if got := drops(ask); !slices.Equal(got, c.want) {
				t.Errorf("%s, goal %s: offloads taken back %+v, want %+v", c.name, ask.Goal, got, c.want)
			}
		}
		if got := drops(Ask{Goal: Fit}); got != nil {
			t.Errorf("%s: to fit the GPU, offloads taken back %+v, want none", c.name, got)
		}
	}
}

// tierTakenBack says whether offload o holds some tier nearer the GPU than
// cur does (none < cpu < nvme) and none further.
func tierTakenBack(cur, o core.Offload) bool {
	rank := map[string]int{"": 0, "cpu": 1, "nvme": 2}
	nearer := false
	for _, f := range [][2]string{{cur.Optimizer, o.Optimizer}, {cur.Params, o.Params}, {cur.Activations, o.Activations}} {
		switch a, b := rank[f[0]], rank[f[1]]; {
		case b > a:
			return false
		case b < a:
			nearer = true
		}
	}
	return nearer
}

// TestBufferChanges: FSDP1 that prefetches is offered no prefetching, and
// ZeRO its buckets at the Hugging Face Trainer's "auto" sizes (a hidden
// size of 4,096: a 16,777,216-element reduce bucket, below DeepSpeed's
// 5e8); nothing where the plan has them already or they would not shrink.
func TestBufferChanges(t *testing.T) {
	auto := core.ZeroSize{Auto: true}
	for _, c := range []struct {
		name string
		par  core.Parallelism
		want []string
	}{
		{"FSDP1, torch's BACKWARD_PRE", core.Parallelism{DP: 8, FSDP: true, FSDPVersion: 1},
			[]string{`parallel=parallel(dp=8, fsdp=1, fsdp_backward_prefetch="none")`}},
		{"FSDP1 with forward_prefetch", core.Parallelism{DP: 8, FSDP: true, FSDPVersion: 1, BackwardPrefetch: core.PrefetchNone, ForwardPrefetch: true},
			[]string{`parallel=parallel(dp=8, fsdp=1, fsdp_backward_prefetch="none")`}},
		{"FSDP1 already without", core.Parallelism{DP: 8, FSDP: true, FSDPVersion: 1, BackwardPrefetch: core.PrefetchNone}, nil},
		{"FSDP2", core.Parallelism{DP: 8, FSDP: true}, nil},
		{"ZeRO-2 at DeepSpeed's defaults", core.Parallelism{DP: 8, Zero: 2}, []string{`parallel=parallel(dp=8, zero=2, reduce_bucket_size="auto")`}},
		{"ZeRO-3 at DeepSpeed's defaults", core.Parallelism{DP: 8, Zero: 3},
			[]string{`parallel=parallel(dp=8, zero=3, reduce_bucket_size="auto", stage3_prefetch_bucket_size="auto", stage3_param_persistence_threshold="auto")`}},
		{"ZeRO-3 at the Trainer's sizes", core.Parallelism{DP: 8, Zero: 3, ReduceBucketSize: auto, PrefetchBucketSize: auto, ParamPersistenceThreshold: auto}, nil},
		{"ZeRO-1 with a smaller bucket than auto", core.Parallelism{DP: 8, Zero: 1, ReduceBucketSize: core.ZeroSize{N: 1 << 20, Set: true}}, nil},
	} {
		p := testmodels.LlamaPlan(testmodels.Llama(4096, 2, 32, 8, 14336, 32000, "flash"), 1, 2048, "bf16-mixed", "none", "H100-80GB")
		p.Parallel = c.par
		var got []string
		for _, ch := range bufferChanges(p) {
			got = append(got, ch.String())
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%s: changes (-want +got):\n%s", c.name, diff)
		}
	}
}
