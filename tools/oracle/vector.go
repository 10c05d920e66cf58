package oracle

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/memsh/memsh/lang"
	"go.starlark.net/starlark"
)

// Vector is one stored test vector: a configuration, what PyTorch measured
// for it at each depth (number of blocks), and where the figures came from.
type Vector struct {
	ID       string             `json:"id"`
	Config   Config             `json:"config"`
	Measured map[string]Figures `json:"measured"` // by depth, "1", "3", ...
	Torch    string             `json:"torch"`
	Command  string             `json:"command"`
	Note     string             `json:"note,omitempty"`
	// Open marks a known, not yet fixed difference: the replay asserts
	// that memsh still gives exactly these figures, so a fix (or a new
	// drift) shows, and the vector moves to the passing files.
	Open  *Open                      `json:"open,omitempty"`
	Extra map[string]json.RawMessage `json:"extra,omitempty"`
}

// Open is a recorded difference between memsh and PyTorch.
type Open struct {
	Cause string                 `json:"cause"`
	Memsh map[string]OpenFigures `json:"memsh"` // by depth, as compared
}

// OpenFigures are memsh's figures for an open difference, or the error
// memsh gave instead.
type OpenFigures struct {
	Figures
	Error string `json:"error,omitempty"`
}

// Figures are the asserted quantities. Every one is exact: each is a sum
// of tensor sizes, which memsh derives from the same shapes and dtypes.
type Figures struct {
	Params            int64 `json:"params"`              // unique parameters (a tied weight once)
	Trainable         int64 `json:"trainable"`           // parameters with requires_grad
	ParamBytes        int64 `json:"param_bytes"`         // their storage
	GradBytes         int64 `json:"grad_bytes"`          // .grad after backward
	OptimizerBytes    int64 `json:"optimizer_bytes"`     // AdamW exp_avg + exp_avg_sq
	SavedActivations  int64 `json:"saved_activations"`   // saved storages, class activation (inputs included)
	SavedWeightCopies int64 `json:"saved_weight_copies"` // saved autocast copies of parameters
}

// ReadVectors reads a JSON-lines file of vectors.
func ReadVectors(path string) ([]Vector, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Vector
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for n := 1; sc.Scan(); n++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var v Vector
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, n, err)
		}
		out = append(out, v)
	}
	return out, sc.Err()
}

// Replay runs c with the given depth through memsh and returns its figures.
func Replay(c Config, depth int64) (Figures, string, error) {
	src, err := Script(c, depth)
	if err != nil {
		return Figures{}, "", err
	}
	in := lang.New(lang.Options{})
	defer in.Close()
	g, err := in.ExecFile(context.Background(), "vector.star", []byte(src))
	if err != nil {
		return Figures{}, src, err
	}
	d, ok := g["result"].(*starlark.Dict)
	if !ok {
		return Figures{}, src, fmt.Errorf("script left no result dict")
	}
	var bad []string
	get := func(k string) int64 {
		v, _, _ := d.Get(starlark.String(k))
		if i, ok := v.(starlark.Int); ok {
			if x, ok := i.Int64(); ok {
				return x
			}
		}
		bad = append(bad, k)
		return 0
	}
	f := Figures{
		Params: get("params"), Trainable: get("trainable"), ParamBytes: get("param_bytes"),
		GradBytes: get("grad_bytes"), OptimizerBytes: get("optimizer_bytes"),
		SavedActivations: get("saved_activations"), SavedWeightCopies: get("saved_weight_copies"),
	}
	if len(bad) > 0 {
		return f, src, fmt.Errorf("result has no integer %v", bad)
	}
	return f, src, nil
}
