// Package plans holds train() and the options of a plan: precision
// policies, optimizers, checkpointing, LoRA and quantization, offload,
// parallel layouts and clusters, GPUs. train()'s keywords are declared
// once, in train_keywords.go; the signature, defaults, documentation, a
// plan's attributes, plan.replace() and sweep() axes all come from there.
package plans
