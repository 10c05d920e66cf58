// Package hftest edits the config.json files of sim/testdata/hf for the
// tests of several packages (sim/hf's and builtins' checks of what
// hf_config says about a bad key). It imports nothing of memsh.
package hftest
