package builtins

import (
	"bytes"
	"encoding/json"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/memsh/memsh/jsondoc"
)

// memoryPrelude is Llama-2-7B with 8-bit AdamW and full checkpointing on
// an H100 (issue 24 item 7's plan), at batch 1 and 2; and a paged
// optimizer, whose state is in device use but outside the allocator.
const memoryPrelude = `
block = sequential(
    residual(sequential(rmsnorm(4096, name = "input_layernorm"),
        attention(4096, 32, kv_heads = 32, impl = "flash", rope = True, softmax_fp32 = True, name = "self_attn"))),
    residual(sequential(rmsnorm(4096, name = "post_attention_layernorm"), mlp(4096, 11008, act = "swiglu", name = "mlp"))))
llama7b = model("llama-2-7b", [embedding(32000, 4096, name = "embed_tokens")], repeat(block, 32, name = "layers"),
                rmsnorm(4096, name = "norm"), vocab = 32000)  # @stdlib//llm.star's llama("7b", attn = "flash")
p = train(llama7b, batch = 1, seq = 4096, precision = "bf16-mixed", optimizer = adamw8bit(),
          checkpoint = "full", gpu = "H100")
b1 = simulate(p)
b2 = simulate(p.replace(batch = 2))
paged = simulate(p.replace(optimizer = paged_adamw8bit(), lora = lora(rank = 8, alpha = 16, targets = ["q", "v"])))
def total(r):
    n = 0
    for v in r.breakdown.values():
        n += v
    return n
`

// The breakdown sums to device_used: the reserve grown after the peak of
// allocated memory and paged optimizer state have rows of their own.
func TestBreakdownSumsToDeviceUsed(t *testing.T) {
	runPreludeCases(t, memoryPrelude, []evalCase{
		{expr: "[total(r) == r.device_used for r in [b1, b2, paged]]", want: "[True, True, True]"},
		{expr: "b1.breakdown[\"reserved_later\"] == b1.peak_reserved - (b1.peak_allocated + b1.breakdown[\"fragmentation\"])", want: "True"},
		{expr: "b1.breakdown[\"reserved_later\"] // MiB", want: "500"},
		{expr: "paged.breakdown[\"paged_optimizer\"] == paged.states[\"optimizer\"] and paged.states[\"optimizer\"] > 0", want: "True"},
		{expr: "b1.breakdown[\"paged_optimizer\"]", want: "0"},
		{expr: "\"reserved later  500.00 MiB\" in str(b1) and not \"paged optimizer\" in str(b1)", want: "True"},
	})
}

// More batch, less memory (issue 24 item 7): Llama-2-7B in bf16 with
// AdamW and full checkpointing on an H100 (the README's story,
// testdata/scripts/readme_more_batch_less_memory.txtar). Each steady step
// runs in the cache its first step left (AdamW's state made there:
// sim/replay/lazy_states.go). Batch 2 leaves 2.71 GiB in free blocks at
// its peak (the optimizer step) and grows the reserve last for the 1000
// MiB fp32 gradient of the logits, which none of the 298 cached blocks
// then (at most 752 MiB) can hold; batch 3's tensors leave 2.30 GiB free
// and its device use is lower. The report says which blocks and which
// request.
func TestFragmentationExplained(t *testing.T) {
	prelude := memoryPrelude + `
s2 = simulate(p.replace(batch = 2, precision = "bf16", optimizer = adamw()))
s3 = simulate(p.replace(batch = 3, precision = "bf16", optimizer = adamw()))
`
	runPreludeCases(t, prelude, []evalCase{
		{expr: "s3.device_used < s2.device_used and s3.peak_allocated > s2.peak_allocated", want: "True"},
		{expr: "s2.fragmentation.free_bytes == s2.breakdown[\"fragmentation\"]", want: "True"},
		{expr: "[s2.fragmentation.free_blocks, s2.fragmentation.largest_free // MiB]", want: "[51, 1000]"},
		{expr: "[s3.fragmentation.free_blocks, s3.fragmentation.largest_free // MiB]", want: "[39, 1500]"},
		{expr: "s2.fragmentation.peak_growth.tensor", want: `"grad of loss.out.fp32"`},
		{expr: "[s2.fragmentation.peak_growth.bytes // MiB, s2.fragmentation.peak_growth.cached_blocks, s2.fragmentation.peak_growth.largest_cached // MiB]", want: "[1000, 298, 752]"},
		{expr: "s2.fragmentation.peak_growth.cached_bytes > s2.fragmentation.peak_growth.bytes", want: "True"},
		{expr: "s2.fragmentation.peak_growth.reserved == s2.peak_reserved", want: "True"},
		{expr: "s3.fragmentation.peak_growth.tensor", want: `"grad of loss.out.fp32"`},
		{expr: "[l for l in str(s2).splitlines() if l.startswith(\"  free blocks\") or l.startswith(\"  reserve grew\")]",
			want: `["  free blocks     2.71 GiB cached in 51 free blocks at the peak (the fragmentation row), the largest 1000.00 MiB", ` +
				`"  reserve grew    last, to 65.53 GiB, for grad of loss.out.fp32 (1000.00 MiB, backward): 22.63 GiB was cached then, in 298 free blocks of at most 752.00 MiB: none large enough"]`},
	})
}

// docs/json.md's example is a document the schema reads (no unknown
// field) and that has every field of the report.
func TestJSONDocExample(t *testing.T) {
	md, err := os.ReadFile("../docs/json.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(md)
	i := strings.Index(text, "```json\n")
	if i < 0 {
		t.Fatal("docs/json.md has no ```json example")
	}
	body := text[i+len("```json\n"):]
	body = body[:strings.Index(body, "```")]
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	var doc jsondoc.Doc
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("docs/json.md's example: %v", err)
	}
	var raw struct{ Report map[string]json.RawMessage }
	if err := json.NewDecoder(bytes.NewReader([]byte(body))).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(jsondoc.Report{})
	var all map[string]json.RawMessage
	_ = json.Unmarshal(b, &all)
	var missing []string
	for k := range all {
		if _, ok := raw.Report[k]; !ok && k != "timeline" { // timeline only with simulate(plan, timeline=True)
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("docs/json.md's example lacks %v", missing)
	}
}

// A language model's samples are its sequences.
func TestSamplesPerSecond(t *testing.T) {
	runPreludeCases(t, memoryPrelude, []evalCase{
		{expr: "abs(b2.samples_per_s * 4096 - b2.tokens_per_s) < 1e-6 and abs(b2.samples_per_s * b2.step_time - 2) < 1e-9", want: "True"},
	})
}
