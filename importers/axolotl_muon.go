package importers

// axolotlMuon is Axolotl's optimizer: muon, which core/builders/base.py
// (l.314-330 at 067b021c8) builds from axolotl-contribs-mit
// (contribs/mit/muon/muon.py at 0.0.6) when there is no device mesh
// (utils/distributed.py build_parallelism_config: no fsdp or fsdp_config,
// no tensor, context or expert parallel size), and as its DistMuon over
// the mesh otherwise. Its Muon is memsh's muon(): a momentum buffer
// (zeros_like the gradient) on the 2-D parameters other than embed_tokens
// and lm_head, the Nesterov update a new tensor, Newton-Schulz in K.
// Jordan's reference form (newton_schulz = "reference"); its AdamW steps
// the embedding and the head one parameter at a time (impl = "for-loop").
// What it does otherwise is listed as understood, not modelled.
func axolotlMuon(t *tree) (string, error) {
	if t.hasUnder("fsdp") || t.hasUnder("fsdp_config") || t.has("fsdp_version") {
		return "", t.errorf("optimizer", "optimizer: muon without fsdp (data parallel), or adamw_torch_fused with fsdp",
			"muon with FSDP is Axolotl's DistMuon (contribs/mit/muon/dist_muon.py), which memsh does not replay: it replays Muon on unsharded parameters")
	}
	t.notModelledIf("optimizer", axolotlMuonNote[len("optimizer: "):])
	return `muon(newton_schulz = "reference", impl = "for-loop")`, nil
}

// axolotlMuonNote is what Axolotl's Muon does that muon() does not.
const axolotlMuonNote = "optimizer: Axolotl's Muon (axolotl-contribs-mit 0.0.6) gives the 1-D parameters (norms, biases) no optimizer at all, " +
	"where memsh steps them with AdamW (their moments, a few kilobytes a layer); its Newton-Schulz runs under torch.compile, " +
	"taken as the reference form's eager tensors; a 3-D expert weight fails its assert (p.ndim == 2)"
