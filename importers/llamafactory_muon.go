package importers

// llamaFactoryMuon is LLaMA-Factory's use_muon (train/trainer_utils.py
// _create_muon_optimizer at ff6d4d12e): its copy of K. Jordan's Muon
// (third_party/muon/muon.py) on the 2-D parameters whose names hold
// neither "embed" nor "lm_head", AdamW on the rest, stepped one parameter
// at a time: muon(newton_schulz = "reference", impl = "for-loop"). LoRA+
// (loraplus_lr_ratio) builds its optimizer before use_muon is read, so
// with it use_muon changes nothing. "" when use_muon is off.
func llamaFactoryMuon(t *tree) (string, error) {
	on, err := t.boolean("use_muon", false)
	if err != nil || !on {
		return "", err
	}
	if v, _ := t.get("loraplus_lr_ratio"); v != nil {
		t.notModelledIf("use_muon", "loraplus_lr_ratio is set, and LLaMA-Factory builds LoRA+'s optimizer before it reads use_muon (create_custom_optimizer): the run steps with optim's")
		return "", nil
	}
	return `muon(newton_schulz = "reference", impl = "for-loop")`, nil
}
