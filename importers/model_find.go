package importers

// findModel asks Options.FindModel for the config.json of the model a
// config names by its trainer's modelKey (a Hub id or a folder), when the
// command line gave none (--model) and the zoo has no model of that name
// (hfModels): transformers' from_pretrained reads that config.json
// wherever it lies, so memsh reads the same one. It sets o.Model and
// o.ModelData to what it found and returns where that was, in words; not
// found, it leaves them and keeps where it looked for the importer's
// error (o.modelLooked).
func findModel(tr *trainer, t *tree, o *Options) (from string, err error) {
	if tr.modelKey == "" || o.ModelData != nil || o.Model != "" || o.FindModel == nil {
		return "", nil
	}
	key := tr.modelKey
	l, ok := t.leaves[key]
	for _, a := range tr.modelAlias {
		if !ok {
			key = a
			l, ok = t.leaves[key]
		}
	}
	if !ok {
		return "", nil
	}
	name, ok := l.value.(string)
	if !ok || name == "" {
		return "", nil
	}
	if _, zoo := hfModels[name]; zoo && !tr.configOnly && !swiftMegatron(t) { // Megatron builds every model from its config.json
		return "", nil
	}
	found, err := o.FindModel(name)
	if err != nil {
		return "", t.errorf(key, "pass the model's Hugging Face config.json: --model config.json", "%v", err)
	}
	if found.Data == nil {
		o.modelLooked = found.Looked
		return "", nil
	}
	o.Model, o.ModelData = found.Path, found.Data
	return found.From, nil
}

// modelHint is the hint of a model the zoo does not have: --model, and
// where memsh looked for its config.json (findModel).
func modelHint(o Options) string {
	const hint = "pass the model's Hugging Face config.json: --model config.json"
	if o.modelLooked == "" {
		return hint
	}
	return hint + "; " + o.modelLooked
}
