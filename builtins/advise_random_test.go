package builtins

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
)

// randomAdvice is how many seeded random plans TestRandomAdviceIsWhatToWrite
// advises; MEMSH_ADVISE_RANDOM=N advises N (the seeds 1..N: a failure
// names its seed and the script it wrote).
const randomAdvice = 4

// TestRandomAdviceIsWhatToWrite: writtenBack on seeded random plans of a
// small decoder: precision, optimizer, checkpointing, a layout (DDP,
// ZeRO 1-3, FSDP 1 or 2 with their options, tensor parallelism), LoRA or
// QLoRA, compile, a GPU small enough that the plan does not fit (or,
// when it does, advise(goal="speed")) and, on data parallelism without
// compile, a GRPO step with its vLLM engine colocated (advise's
// vllm_sleep). Every row's change, pasted into
// plan.replace(...), replays as the row says.
func TestRandomAdviceIsWhatToWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("advises and replays every row of each plan")
	}
	n := testmodels.Draws(t, "MEMSH_ADVISE_RANDOM", randomAdvice)
	for seed := 1; seed <= n; seed++ {
		script, what := randomAdvicePlan(uint64(seed))
		t.Run(fmt.Sprintf("seed %d: %s", seed, what), func(t *testing.T) {
			eval := starEval(t, script)
			rows := writtenBack(t, eval, "p", "a")
			if t.Failed() {
				t.Logf("the script:\n%s", script)
			}
			t.Logf("%d rows", rows)
		})
	}
}

// randomAdvicePlan writes seed's script (p, its plan; a, its advice) and
// says what it is.
func randomAdvicePlan(seed uint64) (string, string) {
	r := rand.New(rand.NewPCG(seed, 0xad1))
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	prec := pick("bf16-mixed", "bf16", "fp16-mixed", "fp32")
	args := []string{
		fmt.Sprintf("batch = %d", []int{1, 2, 4}[r.IntN(3)]),
		fmt.Sprintf("seq = %d", []int{512, 1024}[r.IntN(2)]),
		fmt.Sprintf("precision = %q", prec),
		"optimizer = " + pick("adamw()", "adamw(impl = \"fused\")", "sgd(momentum = 0.9)", "adamw8bit()", "lion()"),
		"checkpoint = " + pick(`"none"`, `"full"`, `"selective"`, "checkpoint(every = 2)"),
	}
	gpus := 1
	switch r.IntN(6) {
	case 1:
		args, gpus = append(args, "parallel = parallel(dp = 4)"), 4
	case 2:
		args, gpus = append(args, fmt.Sprintf("parallel = parallel(dp = 4, zero = %d)", 1+r.IntN(3))), 4
	case 3:
		args, gpus = append(args, "parallel = parallel(dp = 4, fsdp = True, reshard_after_forward = "+pick("True", "False")+")"), 4
	case 4:
		args, gpus = append(args, "parallel = parallel(dp = 2, fsdp = 1)"), 2
	case 5:
		args, gpus = append(args, "parallel = parallel(dp = 2, tp = 2, sequence_parallel = True)"), 4
	}
	if r.IntN(3) == 0 {
		args = append(args, "lora = lora(rank = 8, targets = ["+pick(`"all-linear"`, `"q_proj", "v_proj"`)+"])")
		if prec == "bf16-mixed" && gpus == 1 && r.IntN(2) == 0 {
			args = append(args, `quant = "nf4"`)
		}
	}
	if r.IntN(4) == 0 {
		args = append(args, "compile = True")
	}
	mem := []string{"1", "2", "4", "16"}[r.IntN(4)]
	args = append(args, fmt.Sprintf("gpu = gpu(\"A100-80GB\", memory = %s * GiB)", mem))
	so := strings.Join(args, ", ")
	if !strings.Contains(so, "tp = 2") && !strings.Contains(so, "compile") && r.IntN(4) == 0 { // GRPO: data parallelism, eager; drawn last, so the plans before it are the seeds' own
		args = append(args, `preference = grpo(completion = 256, vllm = "colocate", vllm_memory = `+pick("0.2", "0.5")+`)`)
	}
	script := `blk = sequential(residual(sequential(rmsnorm(512), attention(512, heads = 8, kv_heads = 2, rope = True))), residual(sequential(rmsnorm(512), mlp(512, hidden = 1536, act = "swiglu"))))
m = model("m", embedding(8000, 512), repeat(blk, 6), rmsnorm(512), vocab = 8000)
p = train(m, ` + strings.Join(args, ", ") + `)
a = advise(p, top = None) if not simulate(p).fits else advise(p, goal = "speed", top = None)
`
	return script, strings.Join(args, ", ")
}
