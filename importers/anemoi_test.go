package importers

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/memsh/memsh/lang"
	"go.starlark.net/starlark"
)

// brisSizes are what an anemoi config does not hold, read out of the Bris
// checkpoint (extreme-bris docs/INPUTS.md, scripts/extract_graph.py; the
// same figures as examples/lib/bris_plan.star): 1,359,281 grid points,
// 261,634 hidden nodes, 98 dataset variables.
var brisSizes = []string{"memsh.grid_points=1359281", "memsh.hidden_nodes=261634", "memsh.variables=98",
	"memsh.runtime=cuda-2.6"} // extreme-bris scripts/setup_env.sh installs torch 2.6, as examples/lib/bris_plan.star says

// brisEnv is the environment finetune.sbatch (extreme-bris, the commit
// testdata/README.md names) gives the run.
var brisEnv = map[string]string{
	"PYTORCH_CUDA_ALLOC_CONF":            "expandable_segments:True",
	"ANEMOI_INFERENCE_NUM_CHUNKS":        "16",
	"ANEMOI_INFERENCE_NUM_CHUNKS_MAPPER": "32",
	"XBRIS_SEQUENTIAL_MEMBERS":           "1",
}

func getenv(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

// brisNotModelled is what the importer lists of finetune.yaml as
// understood but not modelled.
var brisNotModelled = []string{
	"training.training_loss.losses: anemoi.training.losses.CRPSFFTLoss (a further term of the combined loss)",
	"model.bounding: the output's bounding (in place, on a few variables)",
	// training/ensemble.yaml's gradient_clip, which finetune.yaml keeps
	"training.gradient_clip.algorithm: value, Lightning's clip_grad_value_ (a clamp of every gradient, one pass over them before the step) is not timed",
}

// TestAnemoi imports extreme-bris's finetune.yaml (SEEDS.md story 1's
// public configuration) with finetune.sbatch's environment and checks the
// plan against the one written by hand from the same config and from
// examples/lib/bris_plan.star's assumptions: the stretched graph's sizes
// from the checkpoint, knn 12 and 3 (stretched_grid.yaml), the
// graphtransformer_ens model with num_chunks 4 everywhere, no trainable
// attributes, 11 forcings and 3 diagnostics of 98 variables, ensemble.yaml's
// fp16 autocast, multistep 2 and sanity check, members one at a time.
func TestAnemoi(t *testing.T) {
	const graph = `data_grid = grid("data", 1359281)
hidden_mesh = mesh("hidden", 261634)
`
	model := func(mapperEval, procEval int) string {
		return graph + strings.NewReplacer("ME", itoa(mapperEval), "PE", itoa(procEval)).Replace(
			`encoder = graph_transformer(data_grid, hidden_mesh, knn_edges(data_grid, hidden_mesh, 12), 1024, 16, edge_attrs = 3, trainable_edge_attrs = 0, chunks = 4, eval_chunks = ME)
decoder = graph_transformer(hidden_mesh, data_grid, knn_edges(hidden_mesh, data_grid, 3), 1024, 16, edge_attrs = 3, trainable_edge_attrs = 0, chunks = 4, eval_chunks = ME)
processor = graph_transformer_processor(multiscale_edges(hidden_mesh), 16, 1024, 16, segments = 4, eval_chunks = PE, qk_norm = True, edge_attrs = 3, trainable_edge_attrs = 0)
model = encoder_processor_decoder("finetune", data_grid, hidden_mesh, encoder, processor, decoder, inputs = 2 * 95 + 84 + 1, outputs = 87,
                                  node_attrs = 0, data_variables = 98, data_dates = 3, anemoi = "0.8.1")
`)
	}
	runImportCases(t, []importCase{{
		name:        "finetune.yaml as finetune.sbatch runs it",
		file:        "anemoi/finetune.yaml",
		step:        anemoiStep(1, 1, 1, 1),
		opts:        Options{GPU: "H200", Overrides: brisSizes, Getenv: getenv(brisEnv)},
		notModelled: brisNotModelled,
		hand: model(32, 16) + `plan = train(model, batch = 1, members = 4, members_mode = "sequential", precision = "fp16-mixed", optimizer = "adamw",
             gpu = "H200", runtime = "cuda-2.6", validation = True, expandable_segments = True)`,
	}, {
		name:        "finetune.yaml in a bare environment, 2 members",
		file:        "anemoi/finetune.yaml",
		step:        anemoiStep(1, 1, 1, 1),
		opts:        Options{GPU: "H200", Overrides: append([]string{"training.ensemble_size_per_device=2"}, brisSizes...)},
		notModelled: brisNotModelled,
		hand:        model(1, 1) + `plan = train(model, batch = 1, members = 2, precision = "fp16-mixed", optimizer = "adamw", gpu = "H200", runtime = "cuda-2.6", validation = True)`,
	}, {
		name: "graph_attention_backend: pyg is what 0.8.1 runs, triton is noted",
		file: "anemoi/finetune.yaml",
		step: anemoiStep(1, 1, 1, 1),
		opts: Options{GPU: "H200", Overrides: append([]string{"training.ensemble_size_per_device=2",
			"+model.encoder.graph_attention_backend=pyg", "+model.processor.graph_attention_backend=triton"}, brisSizes...)},
		notModelled: append([]string{"model.processor.graph_attention_backend: the Triton graph attention of anemoi-models 0.11.0 and later " +
			"(the import replays 0.8.1's PyG message passing; write the model with anemoi=\"0.11.0\" or later for it)"}, brisNotModelled...),
		hand: model(1, 1) + `plan = train(model, batch = 1, members = 2, precision = "fp16-mixed", optimizer = "adamw", gpu = "H200", runtime = "cuda-2.6", validation = True)`,
	}, {
		name: "finetune.yaml with MET's eight GPUs per member, one member per group",
		file: "anemoi/finetune.yaml",
		step: anemoiStep(1, 4*8, 32, 1),
		opts: Options{GPU: "H200", GPUs: 8, Nodes: 4, Getenv: getenv(brisEnv), Overrides: append([]string{"training.ensemble_size_per_device=1",
			"hardware.num_gpus_per_model=8", "hardware.num_gpus_per_ensemble=32"}, brisSizes...)},
		notModelled: append(brisNotModelled[:len(brisNotModelled):len(brisNotModelled)],
			"training.num_sanity_val_steps: Lightning's sanity check before the first step (memsh replays validation on one GPU only)"),
		hand: model(32, 16) + `plan = train(model, batch = 1, members = 4, members_mode = "spread", precision = "fp16-mixed", optimizer = "adamw",
             gpu = "H200", runtime = "cuda-2.6", expandable_segments = True,
             parallel = parallel(dp = 4, cp = 8, cp_mode = "ulysses"), cluster = cluster(nodes = 4, gpus_per_node = 8))`,
	}})
}

func itoa(n int) string { return num(int64(n)) }

// TestAnemoiBrisStory is the Bris story's check: memsh check on
// finetune.yaml, as each of the story's attempts ran it, gives
// examples/bris.star's verdicts: the same fit, the same failing
// allocation (bytes, tensor, phase) and the same device memory as
// bris(...) of examples/lib/bris_plan.star replays.
func TestAnemoiBrisStory(t *testing.T) {
	eval := map[string]string{"ANEMOI_INFERENCE_NUM_CHUNKS": "16", "ANEMOI_INFERENCE_NUM_CHUNKS_MAPPER": "32", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
	bare := map[string]string{"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
	cases := []struct {
		name      string
		env       map[string]string
		overrides []string
		bris      string // the same attempt in examples/bris.star's terms
		want      string // bris.star's verdict, as its golden prints it
	}{
		{"1. 4 stacked members fail validation", bare, nil,
			"bris(members = 4)", "OOM 23.95 GiB encoder.proc.conv.key_j in validation"},
		{"2. 2 stacked members", bare, []string{"training.ensemble_size_per_device=2"},
			"bris(members = 2)", "OOM 31.11 GiB decoder.proc.conv.query_key.fp32 in validation"},
		{"3. chunks 4 -> 16 change nothing in validation", bare,
			[]string{"training.ensemble_size_per_device=2", "model.encoder.num_chunks=16", "model.decoder.num_chunks=16"},
			"bris(members = 2, chunks = 16)", "OOM 31.11 GiB decoder.proc.conv.query_key.fp32 in validation"},
		{"4. eval chunks: validation passes, the training step fails at the decoder's scatter output", eval,
			[]string{"training.ensemble_size_per_device=2", "model.encoder.num_chunks=16", "model.decoder.num_chunks=16"},
			"bris(members = 2, chunks = 16, eval_chunks = 32, processor_eval_chunks = 16)", "OOM 10.37 GiB decoder.proc.conv.chunk4.scatter_out in recompute"},
		{"6. 3 members one at a time fit", brisEnv, []string{"training.ensemble_size_per_device=3"},
			`bris(members = 3, members_mode = "sequential", eval_chunks = 32, processor_eval_chunks = 16)`, "fits 142754 MiB used"},
		{"6. 4 members one at a time do not", brisEnv, nil,
			`bris(members = 4, members_mode = "sequential", eval_chunks = 32, processor_eval_chunks = 16)`, "OOM 7.98 GiB member3.processor.proc.3.blocks.3.conv.query_key.fp32 in recompute"},
	}
	data, err := os.ReadFile(filepath.Join("testdata", "anemoi", "finetune.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	lib, err := os.ReadFile(filepath.Join("..", "examples", "lib", "bris_plan.star"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Import("finetune.yaml", data, defaults(Options{GPU: "H200", Getenv: getenv(tc.env), Overrides: append(tc.overrides, brisSizes...)}))
			if err != nil {
				t.Fatal(err)
			}
			src := "load(\"lib/bris_plan.star\", \"bris\")\n" + res.Script + `
def _verdict(r):
    if r.fits:
        return "fits %d MiB used" % (r.device_used // MiB)
    return "OOM %s %s in %s" % (fmt_bytes(r.oom.bytes), r.oom.tensor, r.oom.phase)
_got = _verdict(simulate(plan))
_want = _verdict(simulate(` + tc.bris + `.replace(validation = True)))
`
			var out strings.Builder
			in := lang.New(lang.Options{Stdout: &out, Files: fstest.MapFS{"check.star": {Data: []byte(src)}, "lib/bris_plan.star": {Data: lib}}})
			defer in.Close()
			g, err := in.RunFile(context.Background(), "check.star")
			if err != nil {
				t.Fatalf("%v\n%s", err, src)
			}
			got, want := g["_got"].(starlark.String).GoString(), g["_want"].(starlark.String).GoString()
			if got != want {
				t.Errorf("memsh check gives %q, bris.star's plan %q", got, want)
			}
			if got != tc.want {
				t.Errorf("memsh check gives %q, want bris.star's %q", got, tc.want)
			}
		})
	}
}

func TestAnemoiErrors(t *testing.T) {
	const cfg = "defaults:\n- graph: stretched_grid\n- model: graphtransformer_ens\n- training: ensemble\n- _self_\ndataloader:\n  batch_size:\n    training: 1\n"
	sizes := "memsh:\n  grid_points: 1000\n  hidden_nodes: 100\n  variables: 30\n"
	runErrorCases(t, []errorCase{
		{name: "no grid size", file: "a.yaml", config: cfg,
			want: "a.yaml: key memsh.grid_points: missing: the dataset's grid points are not in an anemoi config", wantHint: "memsh.grid_points=N"},
		{name: "no mesh size for a stretched mesh", file: "a.yaml", config: cfg, overrides: []string{"memsh.grid_points=1000"},
			want: "a.yaml: key memsh.hidden_nodes: missing: a StretchedTriNodes mesh's size depends on the dataset's regional area", wantHint: "anemoi-graphs inspect"},
		{name: "a graph whose encoder edges the importer does not read", file: "a.yaml", config: "defaults:\n- graph: multi_scale\ndataloader:\n  batch_size:\n    training: 1\n",
			want: "a.yaml:2: key defaults: config group graph: multi_scale is not one memsh check models", wantHint: "stretched_grid"},
		{name: "the deterministic training group", file: "a.yaml", config: "defaults:\n- training: default\ndataloader:\n  batch_size:\n    training: 1\n",
			want: "a.yaml:2: key defaults: config group training: default is not one memsh check models", wantHint: "ensemble"},
		{name: "cut-off encoder edges", file: "a.yaml", config: cfg + sizes + "graph:\n  edges:\n  - edge_builders:\n    - _target_: anemoi.graphs.edges.CutOffEdges\n  - edge_builders:\n    - _target_: anemoi.graphs.edges.MultiScaleEdges\n  - edge_builders:\n    - _target_: anemoi.graphs.edges.KNNEdges\n      num_nearest_neighbours: 3\n",
			want: "a.yaml:15: key graph.edges: edge set 1: anemoi.graphs.edges.CutOffEdges is not modelled", wantHint: "KNNEdges"},
		{name: "too few variables", file: "a.yaml", config: cfg + "memsh:\n  grid_points: 1000\n  hidden_nodes: 100\n  variables: 15\n",
			want: "a.yaml:12: key memsh.variables: 15 variables leave no prognostic one after 13 forcings and 2 diagnostics", wantHint: "every variable"},
		{name: "an unknown precision", file: "a.yaml", config: cfg + sizes + "training:\n  precision: 8-mixed\n",
			want: "a.yaml:14: key training.precision: unknown precision 8-mixed", wantHint: "bf16-mixed"},
		{name: "an ensemble that is not whole model groups", file: "a.yaml", config: cfg + sizes + "hardware:\n  num_gpus_per_model: 4\n  num_gpus_per_ensemble: 6\n", opts: Options{GPUs: 8},
			want: "a.yaml:15: key hardware.num_gpus_per_ensemble: 6 GPUs per ensemble do not divide into model groups of 4", wantHint: "multiple of hardware.num_gpus_per_model"},
		{name: "more GPUs per ensemble than the job has", file: "a.yaml", config: cfg + sizes + "hardware:\n  num_gpus_per_ensemble: 4\n",
			want: "a.yaml:14: key hardware.num_gpus_per_ensemble: the job's 1 GPUs (--gpus x --nodes) do not divide into ensembles of 4", wantHint: "--gpus N"},
		{name: "stacked members on several model groups", file: "a.yaml", config: cfg + sizes + "hardware:\n  num_gpus_per_ensemble: 2\n", opts: Options{GPUs: 2},
			want: "a.yaml: key training.ensemble_size_per_device: 4 members on each of 2 model groups per ensemble is not modelled", wantHint: "set it to 1"},
		{name: "an eval chunk count that is not a number", file: "a.yaml", config: cfg + sizes, opts: Options{Getenv: getenv(map[string]string{"ANEMOI_INFERENCE_NUM_CHUNKS": "many"})},
			want: "environment: key ANEMOI_INFERENCE_NUM_CHUNKS: want a whole number, got many"},
	})
}
