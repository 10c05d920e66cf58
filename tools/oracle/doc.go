// Package oracle replays the differential-test vectors: configurations
// measured in PyTorch by difftest.py, each written here as a memsh script
// and run through the Starlark interpreter, so the test drives memsh the
// way its users do.
package oracle
