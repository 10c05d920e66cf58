package builtins

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memsh/memsh/builtins/host"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// adviseWrittenPrelude is plans advise() has many kinds of rows for: a
// 7B that does not fit one GPU (precision, optimizer, compile,
// checkpointing, offload, ZeRO, the allocator), the same on 8 GPUs
// (layouts), a fitting plan asked for speed, a LoRA plan in bf16 (its
// adapters' dtype), and a budget below what the first plan needs.
const adviseWrittenPrelude = `
dim = 4096
block = sequential(
    residual(sequential(rmsnorm(dim), attention(dim, heads = 32, rope = True))),
    residual(sequential(rmsnorm(dim), mlp(dim, hidden = 11008, act = "swiglu"))),
)
llama = model("llama-2-7b", embedding(32000, dim), repeat(block, 32), rmsnorm(dim), vocab = 32000)
oom = train(llama, batch = 1, seq = 2048, precision = "bf16-mixed", optimizer = adamw(), gpu = "A100-80GB")
ddp = train(llama, batch = 2, seq = 4096, precision = "bf16-mixed", optimizer = adamw(), gpu = "A100-40GB", parallel = parallel(dp = 8))
fitting = oom.replace(precision = "bf16", checkpoint = "full")
blk = sequential(residual(sequential(rmsnorm(256), attention(256, 4))), residual(sequential(rmsnorm(256), mlp(256, 1024, act = "swiglu"))))
tl = train(model("tiny", embedding(1000, 256), repeat(blk, 4), rmsnorm(256), vocab = 1000), batch = 8, seq = 512, precision = "bf16",
           gpu = "A100-80GB", lora = lora(rank = 16, targets = ["all-linear"]))
plans = {
    "oom": (oom, advise(oom, top = None)),
    "ddp": (ddp, advise(ddp, top = None)),
    "fast": (fitting, advise(fitting, goal = "speed", top = None)),
    "lora": (tl, advise(tl, budget = 0.9 * simulate(tl).device_used, top = None)),
    "budget": (oom, advise(oom, budget = 60 * GiB, top = None)),
}
`

// TestAdviceIsWhatToWrite: every row's change is what a user writes. Its
// text, pasted into plan.replace(...) of the script's own plan, makes a
// plan that replays as the row says (device memory, peak, step time).
// A change of the model's layers (a graph model's chunks: "encoder:
// chunks=4") is written in the model, not in replace(): none of these
// plans has one.
func TestAdviceIsWhatToWrite(t *testing.T) {
	pre := Predeclared()
	thread := &starlark.Thread{Name: "prelude"}
	(&host.State{}).Attach(thread)
	globals, err := starlark.ExecFileOptions(&syntax.FileOptions{TopLevelControl: true, GlobalReassign: true}, thread, "prelude.star", adviseWrittenPrelude, pre)
	if err != nil {
		t.Fatalf("prelude: %v", err)
	}
	env := starlark.StringDict{}
	for k, v := range pre {
		env[k] = v
	}
	for k, v := range globals {
		env[k] = v
	}
	eval := func(expr string) (starlark.Value, error) {
		thread := &starlark.Thread{Name: "test"}
		(&host.State{}).Attach(thread)
		return starlark.EvalOptions(&syntax.FileOptions{}, thread, "test.star", expr, env)
	}
	rows := 0
	for _, name := range []string{"oom", "ddp", "fast", "lora", "budget"} {
		n, err := eval(fmt.Sprintf("len(plans[%q][1])", name))
		if err != nil {
			t.Fatal(err)
		}
		count, _ := starlark.AsInt32(n)
		if count == 0 {
			t.Errorf("%s: no advice", name)
		}
		for i := range count {
			row := fmt.Sprintf("plans[%q][1][%d]", name, i)
			c, err := eval(row + `["change"]`)
			if err != nil {
				t.Fatal(err)
			}
			change := string(c.(starlark.String))
			if strings.Contains(change, ": ") {
				t.Errorf("%s row %d: a change of the model's layers: %s", name, i, change)
				continue
			}
			written := fmt.Sprintf("simulate(plans[%q][0].replace(%s))", name, change)
			for _, field := range []string{"device_used", "step_time"} {
				expr := fmt.Sprintf("%s.%s == %s[%q]", written, field, row, field)
				v, err := eval(expr)
				if err != nil {
					t.Errorf("%s row %d: %s: %v", name, i, change, err)
					break
				}
				if v != starlark.True {
					got, _ := eval(fmt.Sprintf("(%s.%s, %s[%q])", written, field, row, field))
					t.Errorf("%s row %d: %s: %s written %v, the row's", name, i, change, field, got)
				}
			}
			if v, err := eval(fmt.Sprintf("%s.peak_allocated == simulate(%s[\"plan\"]).peak_allocated", written, row)); err == nil && v != starlark.True {
				t.Errorf("%s row %d: %s: peak allocated differs from the row's plan's", name, i, change)
			}
			rows++
		}
	}
	t.Logf("%d rows written back", rows)
}
