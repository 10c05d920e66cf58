package host

import "strconv"

// Count writes n and its noun, singular for one: Count(1, "plan",
// "plans") is "1 plan" (titles read "1 plans", "1 replays" and "1
// sequences of 128 tokens").
func Count(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.FormatInt(n, 10) + " " + many
}
