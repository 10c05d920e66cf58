package importers

import (
	"fmt"
	"path"
	"strings"
)

// The anemoi model: the graph's edges, the mappers and the processor, and
// the encoder-processor-decoder around them, from the model and data
// config groups (anemoi.go reads the rest of an anemoi config).

// anemoiEdges are the k of the encoder's and decoder's KNNEdges.
func anemoiEdges(t *tree) (enc, dec int64, err error) {
	enc, dec = 12, 3 // stretched_grid.yaml
	v, _ := t.get("graph.edges")
	list, ok := v.([]any)
	if v == nil {
		return enc, dec, nil
	}
	if !ok || len(list) != 3 {
		return 0, 0, t.errorf("graph.edges", "encoder, processor and decoder edges, in anemoi's order", "want a list of three edge sets")
	}
	ks := make([]int64, 3)
	for i, e := range list {
		m, _ := e.(map[string]any)
		builders, _ := m["edge_builders"].([]any)
		if len(builders) != 1 {
			return 0, 0, t.errorf("graph.edges", "", "edge set %d: want one edge builder", i+1)
		}
		b, _ := builders[0].(map[string]any)
		target, _ := b["_target_"].(string)
		switch {
		case i == 1 && target == "anemoi.graphs.edges.MultiScaleEdges":
		case i != 1 && target == "anemoi.graphs.edges.KNNEdges":
			k, ok := b["num_nearest_neighbours"].(int64)
			if !ok || k < 1 || k > 1<<10 {
				return 0, 0, t.errorf("graph.edges", "", "edge set %d: want num_nearest_neighbours, a positive count", i+1)
			}
			ks[i] = k
		default:
			return 0, 0, t.errorf("graph.edges", "memsh check reads KNNEdges mappers and a MultiScaleEdges processor",
				"edge set %d: %s is not modelled", i+1, quoteKey(target))
		}
	}
	return ks[0], ks[2], nil
}

// anemoiModel writes the mappers, the processor and the model.
func anemoiModel(t *tree, o Options, p *plan) error {
	target, err := t.str("model.model._target_", "anemoi.models.models.AnemoiEnsModelEncProcDec")
	if err != nil {
		return err
	}
	if target != "anemoi.models.models.AnemoiEnsModelEncProcDec" {
		return t.errorf("model.model._target_", "memsh check reads anemoi's ensemble model (graphtransformer_ens)", "%s is not modelled", quoteKey(target))
	}
	proc, err := t.str("model.processor._target_", "anemoi.models.layers.processor.GraphTransformerProcessor")
	if err != nil {
		return err
	}
	if proc != "anemoi.models.layers.processor.GraphTransformerProcessor" {
		return t.errorf("model.processor._target_", "memsh check reads the GraphTransformerProcessor", "%s is not modelled", quoteKey(proc))
	}
	channels, err := t.integer("model.num_channels", 1024, 1, 1<<16)
	if err != nil {
		return err
	}
	fixed, err := anemoiEdgeWidth(t)
	if err != nil {
		return err
	}
	kEnc, kDec, err := anemoiEdges(t)
	if err != nil {
		return err
	}
	env := func(names ...string) (int64, error) {
		for _, n := range names {
			if s := strings.TrimSpace(o.Getenv(n)); s != "" {
				e := newTree("environment")
				e.leaves[n] = leaf{value: s}
				return e.integer(n, 1, 1, 1<<20)
			}
		}
		return 1, nil
	}
	mapperEval, err := env("ANEMOI_INFERENCE_NUM_CHUNKS_MAPPER", "ANEMOI_INFERENCE_NUM_CHUNKS")
	if err != nil {
		return err
	}
	procEval, err := env("ANEMOI_INFERENCE_NUM_CHUNKS_PROCESSOR", "ANEMOI_INFERENCE_NUM_CHUNKS")
	if err != nil {
		return err
	}
	mapper := func(part, src, dst string, k int64, trainable string) (string, error) {
		heads, err := t.integer("model."+part+".num_heads", 16, 1, 1<<10)
		if err != nil {
			return "", err
		}
		ratio, err := t.integer("model."+part+".mlp_hidden_ratio", 4, 1, 1<<10)
		if err != nil {
			return "", err
		}
		chunks, err := t.integer("model."+part+".num_chunks", 1, 1, 1<<20)
		if err != nil {
			return "", err
		}
		tr, err := t.integer("model.trainable_parameters."+trainable, 8, 0, 1<<10)
		if err != nil {
			return "", err
		}
		t.notModelledIf("model."+part+".qk_norm", "the mappers' q/k norms")
		t.notModelledIf("model."+part+".cpu_offload", "anemoi's activation offload")
		tritonBackend(t, "model."+part+".graph_attention_backend")
		return fmt.Sprintf("graph_transformer(%s, %s, knn_edges(%s, %s, %d), %d, %d, mlp_ratio = %d, edge_attrs = %d, trainable_edge_attrs = %d, chunks = %d, eval_chunks = %d)",
			src, dst, src, dst, k, channels, heads, ratio, fixed+tr, tr, chunks, mapperEval), nil
	}
	enc, err := mapper("encoder", "data_grid", "hidden_mesh", kEnc, "data2hidden")
	if err != nil {
		return err
	}
	dec, err := mapper("decoder", "hidden_mesh", "data_grid", kDec, "hidden2data")
	if err != nil {
		return err
	}
	layers, err := t.integer("model.processor.num_layers", 16, 1, 1<<12)
	if err != nil {
		return err
	}
	heads, err := t.integer("model.processor.num_heads", 16, 1, 1<<10)
	if err != nil {
		return err
	}
	ratio, err := t.integer("model.processor.mlp_hidden_ratio", 4, 1, 1<<10)
	if err != nil {
		return err
	}
	segments, err := t.integer("model.processor.num_chunks", 2, 1, layers)
	if err != nil {
		return err
	}
	qk, err := t.boolean("model.processor.qk_norm", true)
	if err != nil {
		return err
	}
	tr, err := t.integer("model.trainable_parameters.hidden2hidden", 8, 0, 1<<10)
	if err != nil {
		return err
	}
	t.notModelledIf("model.processor.cpu_offload", "anemoi's activation offload")
	tritonBackend(t, "model.processor.graph_attention_backend")
	t.notModelledIf("model.cpu_offload", "anemoi's activation offload")
	processor := fmt.Sprintf("graph_transformer_processor(multiscale_edges(hidden_mesh), %d, %d, %d, segments = %d, eval_chunks = %d, mlp_ratio = %d, qk_norm = %s, edge_attrs = %d, trainable_edge_attrs = %d)",
		layers, channels, heads, segments, procEval, ratio, boolean(qk), fixed+tr, tr)
	p.defs = append(p.defs, "encoder = "+enc, "processor = "+processor, "decoder = "+dec)
	return anemoiWhole(t, p)
}

// tritonBackend notes graph_attention_backend "triton": the configs read
// are training-0.5.1's (anemoi-models 0.8.1, PyG's message passing, what
// "pyg" names); the Triton kernel came with 0.11.0.
func tritonBackend(t *tree, key string) {
	if v, _ := t.get(key); v == "triton" {
		t.notModelled = append(t.notModelled, key+": the Triton graph attention of anemoi-models 0.11.0 and later "+
			"(the import replays 0.8.1's PyG message passing; write the model with anemoi=\"0.11.0\" or later for it)")
	}
}

// anemoiEdgeWidth is the fixed edge attributes' width (model.attributes.edges).
func anemoiEdgeWidth(t *tree) (int64, error) {
	names, err := t.strs("model.attributes.edges")
	if err != nil {
		return 0, err
	}
	if names == nil {
		names = []string{"edge_length", "edge_dirs"}
	}
	var width int64
	for _, n := range names {
		w, ok := anemoiEdgeAttributes[n]
		if !ok {
			return 0, t.errorf("model.attributes.edges", "memsh knows edge_length (1 column) and edge_dirs (2)", "unknown edge attribute %s", quoteKey(n))
		}
		width += w
	}
	t.get("model.attributes.nodes")
	return width, nil
}

// anemoiWhole writes the model: its inputs and outputs from the dataset's
// variables, the forcings and the diagnostics.
func anemoiWhole(t *tree, p *plan) error {
	variables, err := t.integer("memsh.variables", 0, 1, 1<<20)
	if err != nil {
		return err
	}
	if variables == 0 {
		return t.errorf("memsh.variables", "the dataset's variables, every one (anemoi-datasets inspect DATASET): memsh.variables=N",
			"missing: the dataset's variable count is not in an anemoi config")
	}
	forcing, err := t.strs("data.forcing")
	if err != nil {
		return err
	}
	diagnostic, err := t.strs("data.diagnostic")
	if err != nil {
		return err
	}
	if forcing == nil { // data/zarr.yaml
		forcing = []string{"cos_latitude", "cos_longitude", "sin_latitude", "sin_longitude", "cos_julian_day", "cos_local_time",
			"sin_julian_day", "sin_local_time", "insolation", "lsm", "sdor", "slor", "z"}
	}
	if diagnostic == nil {
		diagnostic = []string{"tp", "cp"}
	}
	prognostic := variables - int64(len(forcing)) - int64(len(diagnostic))
	if prognostic < 1 {
		return t.errorf("memsh.variables", "count every variable of the dataset", "%d variables leave no prognostic one after %d forcings and %d diagnostics",
			variables, len(forcing), len(diagnostic))
	}
	multistep, err := t.integer("training.multistep_input", 2, 1, 1<<10)
	if err != nil {
		return err
	}
	data, err := t.integer("model.trainable_parameters.data", 8, 0, 1<<10)
	if err != nil {
		return err
	}
	hidden, err := t.integer("model.trainable_parameters.hidden", 8, 0, 1<<10)
	if err != nil {
		return err
	}
	if hidden != data {
		t.notModelled = append(t.notModelled, fmt.Sprintf("model.trainable_parameters.hidden: the mesh nodes' own trainable attributes (%d; memsh gives both node sets data's %d)", hidden, data))
	}
	noise, err := t.integer("model.noise_injector.noise_channels_dim", 4, 0, 1<<10)
	if err != nil {
		return err
	}
	noiseHidden, err := t.integer("model.noise_injector.noise_mlp_hidden_dim", 32, 1, 1<<16)
	if err != nil {
		return err
	}
	rollout, err := anemoiRollout(t)
	if err != nil {
		return err
	}
	loss, err := anemoiLoss(t)
	if err != nil {
		return err
	}
	t.notModelledIf("model.bounding", "the output's bounding (in place, on a few variables)")
	name := strings.TrimSuffix(path.Base(t.file), path.Ext(t.file))
	// The ensemble model reads multistep x (prognostic + forcing) features,
	// the prognostic skip and a forecast-step column
	// (ens_encoder_processor_decoder.py _assemble_input). The config
	// groups read are training-0.5.1's, which runs anemoi-models 0.8.1.
	p.defs = append(p.defs, fmt.Sprintf("anemoi_model = encoder_processor_decoder(%s, data_grid, hidden_mesh, encoder, processor, decoder, inputs = %d, outputs = %d, loss = %s, node_attrs = %d, noise_channels = %d, noise_hidden = %d, data_variables = %d, data_dates = %d, anemoi = \"0.8.1\")",
		str(name), multistep*(prognostic+int64(len(forcing)))+prognostic+1, prognostic+int64(len(diagnostic)), str(loss), data, noise, noiseHidden, variables, multistep+rollout))
	p.model = "anemoi_model"
	if rollout > 1 {
		p.set("rollout", num(rollout))
	}
	return nil
}

// anemoiRollout is the rollout the run reaches: start, or max when it
// grows with the epochs.
func anemoiRollout(t *tree) (int64, error) {
	start, err := t.integer("training.rollout.start", 1, 1, 1<<10)
	if err != nil {
		return 0, err
	}
	inc, err := t.integer("training.rollout.epoch_increment", 0, 0, 1<<20)
	if err != nil {
		return 0, err
	}
	max, err := t.integer("training.rollout.max", 1, 1, 1<<10)
	if err != nil {
		return 0, err
	}
	if inc > 0 && max > start {
		return max, nil
	}
	return start, nil
}

// anemoiLoss is the training loss: the kernel CRPS (alone or first in a
// CombinedLoss, whose other terms are listed) or the MSE.
func anemoiLoss(t *tree) (string, error) {
	target, err := t.str("training.training_loss._target_", "anemoi.training.losses.kcrps.AlmostFairKernelCRPS")
	if err != nil {
		return "", err
	}
	kind := func(s string) string {
		switch {
		case strings.HasSuffix(s, ".AlmostFairKernelCRPS") || strings.HasSuffix(s, ".KernelCRPS"):
			return "crps"
		case strings.HasSuffix(s, ".MSELoss") || strings.HasSuffix(s, ".WeightedMSELoss"):
			return "mse"
		}
		return ""
	}
	if !strings.HasSuffix(target, ".CombinedLoss") {
		if k := kind(target); k != "" {
			return k, nil
		}
		return "", t.errorf("training.training_loss._target_", "memsh models the kernel CRPS and the MSE", "unknown loss %s", quoteKey(target))
	}
	v, _ := t.get("training.training_loss.losses")
	list, _ := v.([]any)
	loss := ""
	for _, e := range list {
		m, _ := e.(map[string]any)
		s, _ := m["_target_"].(string)
		if k := kind(s); k != "" && loss == "" {
			loss = k
			continue
		}
		t.notModelled = append(t.notModelled, "training.training_loss.losses: "+comment(s)+" (a further term of the combined loss)")
	}
	if loss == "" {
		return "", t.errorf("training.training_loss.losses", "memsh models the kernel CRPS and the MSE", "no loss memsh models in the combined loss")
	}
	return loss, nil
}
