// Package hf reads a Hugging Face config.json and builds the model
// transformers would build for it, out of sim/nn layers: the decoder
// families (Llama and its relatives: Mistral, Mixtral, Qwen2, Gemma,
// Phi-3, ...), GPT-2, GPT-NeoX, OPT, BLOOM, Falcon, and the encoders
// BERT, RoBERTa and XLM-RoBERTa (bert.go) and ModernBERT, with
// parameter counts exact to the parameter as sum(p.numel() for p in
// model.parameters()) gives (tied weights once, buffers never).
//
// hf builds IR and knows nothing of the replay. Sizes are required, flags
// take the defaults of each family's transformers config class, and a
// malformed or unsupported config is an error naming the key.
package hf
