// Package testmodels builds the small and large models that tests and
// benchmarks of several sim packages share.
package testmodels
