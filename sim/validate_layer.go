package sim

// Exported entry points for the Starlark layer, which validates each layer
// as it is built so that errors point at the constructor call.

// ValidateLayer checks l's sizes and options (and those of every layer
// below it); path names l in errors ("attention", "layers.attn").
func ValidateLayer(l Layer, path string) error {
	if err := l.validate(path); err != nil {
		return err
	}
	return nil
}

// TakesTokens reports whether the model starts with an embedding, so its
// input is token ids and a plan needs a sequence length.
func (m *Model) TakesTokens() bool { return startsWithEmbedding(m.Layers) }
