package testmodels

import (
	"os"
	"strconv"
	"testing"
)

// Draws is how many seeded random cases a test runs: the environment
// variable env's count when set (a positive integer, else the test
// fails), def otherwise.
func Draws(t testing.TB, env string, def int) int {
	t.Helper()
	s := os.Getenv(env)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive count", env, s)
	}
	return n
}
