package hf

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// A transformers release as hf_config(transformers=) names it: its
// major.minor, compared with the releases memsh has read.

// parseTransformers reads "major.minor[.patch...]".
func parseTransformers(v string) ([2]int, error) {
	parts := strings.Split(v, ".")
	bad := &units.Error{Msg: fmt.Sprintf("transformers must be a version such as %q (got %q)", DefaultTransformers, v),
		Hint: "the transformers release the model trains with: pip show transformers"}
	if len(parts) < 2 {
		return [2]int{}, bad
	}
	var out [2]int
	for i := range out {
		n, err := strconv.Atoi(parts[i])
		if err != nil || n < 0 || n > 1000 {
			return [2]int{}, bad
		}
		out[i] = n
	}
	return out, nil
}

// newestRelease is the newest transformers release memsh has read, the
// major.minor of DefaultTransformers: what a later release changes
// (modelling files, masks, experts, the loss) is unknown, so
// checkRelease refuses it rather than build it as this one.
func newestRelease() [2]int {
	v, _ := parseTransformers(DefaultTransformers)
	return v
}

// ReleaseAfterNewest says whether transformers release v
// ("major.minor[.patch]") is newer than every release memsh has read
// (checkRelease refuses it); false when v is no release.
func ReleaseAfterNewest(v string) bool {
	p, err := parseTransformers(v)
	return err == nil && !atLeast(newestRelease(), p)
}

// checkRelease refuses a transformers release that is no version or is
// newer than newestRelease ("" is DefaultTransformers).
func checkRelease(version string) error {
	if version == "" {
		return nil
	}
	v, err := parseTransformers(version)
	if err != nil {
		return err
	}
	if newest := newestRelease(); !atLeast(newest, v) {
		return &units.Error{Msg: fmt.Sprintf("transformers %q is newer than the releases memsh models (up to %d.%d)", version, newest[0], newest[1]),
			Hint: fmt.Sprintf("memsh has read transformers' wheels up to %s; a later release may build this model otherwise: pass transformers=%q to model it as that release does, or leave transformers out", DefaultTransformers, DefaultTransformers)}
	}
	return nil
}

// ReleaseAtLeast says whether transformers release v ("major.minor[.patch]")
// is major.minor or later; false when v is no release.
func ReleaseAtLeast(v string, major, minor int) bool {
	p, err := parseTransformers(v)
	return err == nil && atLeast(p, [2]int{major, minor})
}

func atLeast(v, since [2]int) bool {
	return v[0] > since[0] || (v[0] == since[0] && v[1] >= since[1])
}
