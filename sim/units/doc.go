// Package units is the vocabulary every engine package shares: tensor
// element types (DType) and their sizes, overflow-checked shape and size
// arithmetic, byte formatting, counts of a noun for messages (Count: "1
// image", "2 images"), and the engine's Error (with IntMsg,
// intmsg.go: a message of integers for refusals counted by the ten
// thousand).
//
// Sizes are checked where they enter the engine. Every figure in a report is
// an int64 of bytes, a sum of products of shapes; a wrapped product would be
// a silently wrong number, so a tensor's element count is at most
// MaxElements (its bytes in the widest dtype at most MaxBytes, 4 EiB) and
// larger shapes are errors (ShapeError), not numbers.
//
// Error carries the path of the offending object inside a plan and a hint;
// the Starlark layer adds the script position (Origin).
//
// units imports nothing from the module.
package units
