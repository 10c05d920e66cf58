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
// adapters' dtype), a budget below what the first plan needs, and the LoRA
// plan as a GRPO step whose colocated vLLM engine takes the GPU (its
// engine asleep).
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
tg = tl.replace(preference = grpo(completion = 256, vllm = "colocate", vllm_memory = 0.99))
plans = {
    "oom": (oom, advise(oom, top = None)),
    "ddp": (ddp, advise(ddp, top = None)),
    "fast": (fitting, advise(fitting, goal = "speed", top = None)),
    "lora": (tl, advise(tl, budget = 0.9 * simulate(tl).device_used, top = None)),
    "budget": (oom, advise(oom, budget = 60 * GiB, top = None)),
    "grpo": (tg, advise(tg, top = None)),
}
`

// TestAdviceIsWhatToWrite: every row's change is what a user writes. Its
// text, pasted into plan.replace(...) of the script's own plan, makes a
// plan that replays as the row says (device memory, peak, step time).
// A change of the model's layers (a graph model's chunks: "encoder:
// chunks=4") is written in the model, not in replace(): none of these
// plans has one.
func TestAdviceIsWhatToWrite(t *testing.T) {
	eval := starEval(t, adviseWrittenPrelude)
	rows := 0
	for _, name := range []string{"oom", "ddp", "fast", "lora", "budget", "grpo"} {
		n := writtenBack(t, eval, fmt.Sprintf("plans[%q][0]", name), fmt.Sprintf("plans[%q][1]", name))
		if n == 0 {
			t.Errorf("%s: no advice", name)
		}
		rows += n
	}
	t.Logf("%d rows written back", rows)
}

// starEval executes prelude and returns an evaluator of expressions over
// its globals (and the builtins).
func starEval(t *testing.T, prelude string) func(string) (starlark.Value, error) {
	t.Helper()
	pre := Predeclared()
	thread := &starlark.Thread{Name: "prelude"}
	(&host.State{}).Attach(thread)
	globals, err := starlark.ExecFileOptions(&syntax.FileOptions{TopLevelControl: true, GlobalReassign: true}, thread, "prelude.star", prelude, pre)
	if err != nil {
		t.Fatalf("prelude: %v\n%s", err, prelude)
	}
	env := starlark.StringDict{}
	for k, v := range pre {
		env[k] = v
	}
	for k, v := range globals {
		env[k] = v
	}
	return func(expr string) (starlark.Value, error) {
		thread := &starlark.Thread{Name: "test"}
		(&host.State{}).Attach(thread)
		return starlark.EvalOptions(&syntax.FileOptions{}, thread, "test.star", expr, env)
	}
}

// writtenBack pastes each row's change of the advice table (the
// expression advice) into plan.replace(...) and checks that the plan it
// writes replays as the row says; it returns the rows checked.
func writtenBack(t *testing.T, eval func(string) (starlark.Value, error), plan, advice string) int {
	t.Helper()
	n, err := eval("len(" + advice + ")")
	if err != nil {
		t.Fatal(err)
	}
	count, _ := starlark.AsInt32(n)
	for i := range count {
		row := fmt.Sprintf("%s[%d]", advice, i)
		c, err := eval(row + `["change"]`)
		if err != nil {
			t.Fatal(err)
		}
		change := string(c.(starlark.String))
		if strings.Contains(change, ": ") {
			t.Errorf("row %d: a change of the model's layers: %s", i, change)
			continue
		}
		written := fmt.Sprintf("simulate(%s.replace(%s))", plan, change)
		for _, field := range []string{"device_used", "step_time"} {
			v, err := eval(fmt.Sprintf("%s.%s == %s[%q]", written, field, row, field))
			if err != nil {
				t.Errorf("row %d: %s: %v", i, change, err)
				break
			}
			if v != starlark.True {
				got, _ := eval(fmt.Sprintf("(%s.%s, %s[%q])", written, field, row, field))
				t.Errorf("row %d: %s: %s written, the row's: %v", i, change, field, got)
			}
		}
		if v, err := eval(fmt.Sprintf("%s.peak_allocated == simulate(%s[\"plan\"]).peak_allocated", written, row)); err == nil && v != starlark.True {
			t.Errorf("row %d: %s: peak allocated differs from the row's plan's", i, change)
		}
	}
	return int(count)
}
