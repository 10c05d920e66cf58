package oracle

import (
	"fmt"
	"strconv"
	"strings"
)

// Config is a vector's configuration (difftest.py's generator writes it;
// blocks.py builds it in PyTorch, Script writes it for memsh).
type Config struct {
	H          int64    `json:"h"`
	A          int64    `json:"a"`
	KV         int64    `json:"kv"`
	FFN        int64    `json:"ffn"`
	S          int64    `json:"s"`
	B          int64    `json:"b"`
	Vocab      int64    `json:"vocab"`
	Norm       string   `json:"norm"` // layernorm | layernorm_nobias | rmsnorm
	FusedQKV   bool     `json:"fused_qkv"`
	QKVBias    bool     `json:"qkv_bias"`
	OutBias    bool     `json:"out_bias"`
	Rope       bool     `json:"rope"`
	SoftmaxF32 bool     `json:"softmax_fp32"`
	Attn       string   `json:"attn"` // eager | sdpa
	AttnDrop   float64  `json:"attn_drop"`
	Act        string   `json:"act"`
	MLPBias    bool     `json:"mlp_bias"`
	MLPDrop    float64  `json:"mlp_drop"`
	FinalNorm  bool     `json:"final_norm"`
	Tie        bool     `json:"tie"`
	LogitsFP32 bool     `json:"logits_fp32"`
	LossChunks int64    `json:"loss_chunks"`
	DType      string   `json:"dtype"` // fp32 | bf16 | amp_bf16
	Ckpt       Ckpt     `json:"ckpt"`
	LoRA       *LoRA    `json:"lora,omitempty"`
	Freeze     []string `json:"freeze,omitempty"`
	Compile    string   `json:"compile,omitempty"` // "", "blocks": torch.compile per block (compiled.py)
}

// Ckpt is the checkpointing of a configuration.
type Ckpt struct {
	Mode      string   `json:"mode"` // none | full | selective | every | modules | op | layer
	Every     int64    `json:"every,omitempty"`
	Modules   []string `json:"modules,omitempty"`
	Reentrant bool     `json:"reentrant"`
	Budget    float64  `json:"budget,omitempty"`
}

// LoRA is PEFT's LoraConfig as blocks.py applies it.
type LoRA struct {
	Rank    int64    `json:"rank"`
	Alpha   float64  `json:"alpha"`
	Targets []string `json:"targets"`
}

var precisions = map[string]string{"fp32": "fp32", "bf16": "bf16", "amp_bf16": "bf16-mixed"}

// pyFloat is f as a Starlark float literal (0.0, not the int 0).
func pyFloat(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eInN") {
		s += ".0"
	}
	return s
}

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

func strList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func (c Config) norm() (string, error) {
	switch c.Norm {
	case "layernorm":
		return fmt.Sprintf("layernorm(%d)", c.H), nil
	case "layernorm_nobias":
		return fmt.Sprintf("layernorm(%d, bias = False)", c.H), nil
	case "rmsnorm":
		return fmt.Sprintf("rmsnorm(%d)", c.H), nil
	}
	return "", fmt.Errorf("unknown norm %q", c.Norm)
}

func (c Config) checkpoint() (string, error) {
	k := c.Ckpt
	re := fmt.Sprintf("reentrant = %s", pyBool(k.Reentrant))
	switch k.Mode {
	case "none":
		return `"none"`, nil
	case "full", "selective":
		return fmt.Sprintf("checkpoint(%q, %s)", k.Mode, re), nil
	case "every":
		return fmt.Sprintf("checkpoint(every = %d, %s)", k.Every, re), nil
	case "modules":
		return fmt.Sprintf("checkpoint(modules = %s, %s)", strList(k.Modules), re), nil
	case "op": // torchtitan's per-op policy (sac.py), non-reentrant only
		return `checkpoint(policy = "op")`, nil
	case "layer":
		return fmt.Sprintf("checkpoint(policy = \"layer\", every = %d, %s)", k.Every, re), nil
	case "budget": // torch.compile's memory budget (compiled.py), a fraction
		return fmt.Sprintf("checkpoint(budget = %s)", pyFloat(k.Budget)), nil
	}
	return "", fmt.Errorf("unknown checkpoint mode %q", k.Mode)
}

// Script writes c with the given number of blocks as a memsh script that
// leaves its figures in the global result. runtime "cpu" is PyTorch 2.x on
// the CPU, where the vectors were measured.
func Script(c Config, layers int64) (string, error) {
	nm, err := c.norm()
	if err != nil {
		return "", err
	}
	prec, ok := precisions[c.DType]
	if !ok {
		return "", fmt.Errorf("unknown dtype %q", c.DType)
	}
	ck, err := c.checkpoint()
	if err != nil {
		return "", err
	}
	var w strings.Builder
	fmt.Fprintf(&w, "attn = attention(%d, heads = %d, kv_heads = %d, qkv_bias = %s, out_bias = %s, impl = %q, causal = True, dropout = %g, rope = %s, fused_qkv = %s, softmax_fp32 = %s)\n",
		c.H, c.A, c.KV, pyBool(c.QKVBias), pyBool(c.OutBias), c.Attn, c.AttnDrop, pyBool(c.Rope), pyBool(c.FusedQKV), pyBool(c.SoftmaxF32))
	fmt.Fprintf(&w, "ffn = mlp(%d, hidden = %d, act = %q, bias = %s, dropout = %g)\n", c.H, c.FFN, c.Act, pyBool(c.MLPBias), c.MLPDrop)
	fmt.Fprintf(&w, "block = sequential(residual(sequential(%s, attn)), residual(sequential(%s, ffn)))\n", nm, nm)
	layersArgs := fmt.Sprintf("embedding(%d, %d), repeat(block, %d)", c.Vocab, c.H, layers)
	if c.FinalNorm {
		layersArgs += ", " + nm
	}
	fmt.Fprintf(&w, "m = model(\"difftest\", %s, vocab = %d, tie_embeddings = %s, logits_fp32 = %s)\n",
		layersArgs, c.Vocab, pyBool(c.Tie), pyBool(c.LogitsFP32))
	extra := ""
	if c.LoRA != nil {
		// blocks.py's LoRALinear builds its adapters in the model's dtype
		// (PEFT's layer without get_peft_model's fp32 cast)
		extra += fmt.Sprintf(", lora = lora(rank = %d, alpha = %g, targets = %s, autocast_adapter_dtype = False)", c.LoRA.Rank, c.LoRA.Alpha, strList(c.LoRA.Targets))
	}
	if len(c.Freeze) > 0 {
		extra += ", freeze = " + strList(c.Freeze)
	}
	if c.LossChunks > 1 {
		extra += fmt.Sprintf(", loss_chunks = %d", c.LossChunks)
	}
	if c.Compile != "" {
		extra += fmt.Sprintf(", compile = %q", c.Compile)
	}
	fmt.Fprintf(&w, "plan = train(m, batch = %d, seq = %d, precision = %q, optimizer = adamw(), checkpoint = %s, runtime = \"cpu\", gpu = gpu(\"cpu\", memory = 1024 * GiB)%s)\n",
		c.B, c.S, prec, ck, extra)
	w.WriteString("r = simulate(plan)\n")
	w.WriteString("result = {\"params\": r.params, \"trainable\": r.trainable_params, \"param_bytes\": r.states[\"params\"], " +
		"\"grad_bytes\": r.states[\"grads\"], \"optimizer_bytes\": r.states[\"optimizer\"], " +
		"\"saved_activations\": r.saved_activations, \"saved_weight_copies\": r.saved_weight_copies}\n")
	return w.String(), nil
}
