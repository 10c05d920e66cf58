package builtins

import "testing"

func TestTableLayer(t *testing.T) {
	runEvalCases(t, []evalCase{
		// 2^20 rows per head x 16 heads x 32 = 536,870,912 parameters.
		{expr: `table("ngram", 1 << 20, 32, heads=16).params`, want: "536870912"},
		{expr: `table("ngram", 1 << 20, 32, heads=16, grad="sparse", placement="host").kind`, want: `"table"`},
		{expr: `table("t", 100, 8)`, want: `table(1 heads x 100 rows x 8, dense, device, name="t", params=800)`},
		{expr: `table("t", 100, 8, heads=2, reads_per_token=4, grad="sparse", pad_rows=False)`,
			want: `table(2 heads x 100 rows x 8, sparse, device, 4 reads/token, unpadded, name="t", params=1600)`},
		{expr: `table("t", 0, 8)`, err: "rows must be positive (got 0)"},
		{expr: `table("t", 10, 8, heads=3, reads_per_token=4)`, err: "reads_per_token must be a multiple of heads (got 4 reads for 3 heads)"},
		{expr: `table("t", 10, 8, reads_per_token=0)`, err: "reads_per_token must be positive (got 0)"},
		{expr: `table("t", 10, 8, grad="lazy")`, err: `unknown grad "lazy" (known: dense, sparse)`},
		{expr: `table("t", 10, 8, placement="nvme")`, err: `unknown placement "nvme" (known: device, host)`},
		{expr: `table("t", 10, 8, placement="host")`, err: `placement="host" needs grad="sparse"`},
		{expr: `table("t", 1 << 40, 1 << 20, heads=1 << 10)`, err: "table too large"},
		{expr: `table("", 10, 8)`, err: "table name must not be empty"},
	})
}

// ngramPrelude is SEEDS.md story 4's model at 2^20 rows per head, as
// examples/ngram_table.star builds it.
const ngramPrelude = `
def xl(t):
    block = sequential(
        residual(sequential(layernorm(512), attention(512, 8))),
        residual(sequential(layernorm(512), mlp(512, 2048))),
    )
    return model("xl", embedding(8192, 512), residual(t), repeat(block, 8), layernorm(512),
                 vocab = 8192, tie_embeddings = True)

card = gpu("RTX-3090", pcie_gbps = 25)
def plan(grad, placement, pad = True):
    t = table("ngram", 1 << 20, 32, heads = 16, grad = grad, placement = placement, pad_rows = pad)
    return train(xl(t), batch = 16, seq = 512, gpu = card)

dense = simulate(plan("dense", "device")).tables[0]
host = simulate(plan("sparse", "host"))
steps = table_steps(plan("sparse", "device", pad = False), [7000, 7900, 6800], pool = "exact")
padded = table_steps(plan("sparse", "device"), [7000, 7900, 6800], pool = "exact")
`

func TestTableReport(t *testing.T) {
	runPreludeCases(t, ngramPrelude, []evalCase{
		{expr: "dense.device_bytes", want: "6442450944"},   // 12 x 536,870,912
		{expr: "dense.optimizer_hbm", want: "15032385536"}, // 28 x 536,870,912
		{expr: "dense.rows_read", want: "131072"},          // 16 x 512 x 16
		{expr: "host.tables[0].device_bytes", want: "0"},
		{expr: `host.traffic["pcie"]`, want: "16777216"},                  // 131,072 rows x 32 x 4 B each way
		{expr: "int(host.tables[0].pcie_round_trip * 1e6)", want: "1342"}, // 2 x 16,777,216 / 25e9 s, in µs
		{expr: "host.tables[0].pcie_gbps", want: "25.0"},
		{expr: `host.tables[0].host_assumption.startswith("524288 scattered 128-byte row accesses")`, want: "True"},
		{expr: "host.fits", want: "True"},
		{expr: "[s.rows for s in steps.steps]", want: "[7000, 7900, 6800]"},
		{expr: "steps.growth > 0", want: "True"},
		{expr: "[s.rows for s in padded.steps]", want: "[8192, 8192, 8192]"},
		{expr: "padded.growth", want: "0"},
		{expr: `table_steps(plan("dense", "device"), [10])`, err: `the plan has no table with grad="sparse"`},
		{expr: `table_steps(plan("sparse", "device"), [9000])`, err: "rows_per_step[0] must be in [1, 8192]"},
		{expr: `table_steps(plan("sparse", "device"), [10], pool="lru")`, err: `unknown pool "lru"`},
		{expr: `table_steps(plan("sparse", "device"), [])`, err: "rows_per_step is empty"},
		{expr: `table_steps(plan("sparse", "device"), 5)`, err: "rows_per_step must be a list of ints"},
	})
}
