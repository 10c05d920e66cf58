// Package litgpt models LitGPT (Lightning-AI/lit-gpt) as its fine-tuning
// scripts run it under Lightning Fabric: its config zoo (LitGPTConfigs),
// the GPT with a fused qkv projection, LoRA, adapter and adapter-v2
// layers, RMSNorm in the input dtype, rotary embeddings from fp32 buffers,
// and the output head applied per 128-token chunk (LitHead). The
// differences from the Hugging Face lowering that move memory are listed
// at the top of litgpt.go.
package litgpt
