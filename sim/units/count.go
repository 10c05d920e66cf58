package units

import (
	"strconv"
	"strings"
)

// Count writes n of a countable noun for a message: "1 image",
// "2 images", "0 tiles", "3 patches". The noun is given in the singular
// and takes a regular English plural: "es" after s, x, z, ch and sh,
// "s" after anything else. Irregular nouns (a "y" after a consonant,
// "child") are not handled: the messages count images, videos, frames,
// tiles and patches.
func Count(n int64, noun string) string {
	s := strconv.FormatInt(n, 10) + " " + noun
	switch {
	case n == 1:
		return s
	case strings.HasSuffix(noun, "s"), strings.HasSuffix(noun, "x"), strings.HasSuffix(noun, "z"),
		strings.HasSuffix(noun, "ch"), strings.HasSuffix(noun, "sh"):
		return s + "es"
	}
	return s + "s"
}
