package graph

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// Version is the anemoi-models release whose allocations a graph model
// replays, 0.Minor.Patch. Where behaviour differs memsh follows two
// families:
//
//   - 0.6.0 to 0.8.1 (the zero Version in Go): each mapper under one
//     checkpoint, edge chunks scattering into tensors over all
//     destination nodes (mapper.go); chunks in training,
//     ANEMOI_INFERENCE_NUM_CHUNKS_MAPPER in eval (block.py@models-0.8.1
//     l.724);
//   - 0.9.0 and later (PR #406): the mapper chunks its destination nodes,
//     each chunk under a checkpoint of its own, max(chunks, eval chunks)
//     in training and eval alike (mapper_chunked.go);
//   - 0.16.0 and later (PR #1102, "graph partitioning"): the chunks are
//     slices of destination-sorted edges (GraphPartition.materialise),
//     and model sharding shards the destination nodes and their edges
//     over the model's GPUs (mapper_partitioned.go); from 0.17.0 (PR
//     #1162) the graph-transformer processor exchanges halo nodes
//     instead (shard_edges.go): memsh replays model sharding of 0.17.0
//     and later, read at 0.18.0.
//
// The processors, the ensemble model's input and output and the loss are
// lowered the same for both.
type Version struct{ Minor, Patch int }

// CurrentVersion is the newest release memsh's graph lowering was read
// against: models-0.18.0 (ecmwf/anemoi-core c3c7a893), the default of
// encoder_processor_decoder(anemoi=...).
func CurrentVersion() Version { return Version{Minor: 18} }

// ParseVersion reads "0.M" or "0.M.P" for a release memsh simulates.
func ParseVersion(s string) (Version, error) {
	bad := &units.Error{Path: "anemoi", Msg: fmt.Sprintf("must name an anemoi-models release like \"0.8.1\" or %q (got %q)", CurrentVersion().String(), s)}
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(parts) > 3 || parts[0] != "0" {
		return Version{}, bad
	}
	var v Version
	var err error
	if v.Minor, err = strconv.Atoi(parts[1]); err != nil || v.Minor < 0 {
		return Version{}, bad
	}
	if len(parts) == 3 {
		if v.Patch, err = strconv.Atoi(parts[2]); err != nil || v.Patch < 0 {
			return Version{}, bad
		}
	}
	cur := CurrentVersion()
	switch {
	case v.Minor < 6:
		return Version{}, &units.Error{Path: "anemoi", Msg: fmt.Sprintf("anemoi-models %s is not simulated: memsh replays 0.6.0 to %s", s, cur),
			Hint: "anemoi=\"0.8.1\" replays the mappers of 0.6.0 to 0.8.1 (0.5 read ANEMOI_INFERENCE_NUM_CHUNKS where 0.6 reads ANEMOI_INFERENCE_NUM_CHUNKS_MAPPER: pass its value as eval_chunks)"}
	case v.Minor > cur.Minor || (v.Minor == cur.Minor && v.Patch > cur.Patch):
		return Version{}, &units.Error{Path: "anemoi", Msg: fmt.Sprintf("anemoi-models %s is newer than the %s memsh's graph lowering was read against", s, cur),
			Hint: fmt.Sprintf("anemoi=%q", cur.String())}
	}
	return v, nil
}

// Chunked reports the mapper of 0.9.0 and later (mapper_chunked.go).
func (v Version) Chunked() bool { return v.Minor >= 9 }

// Partitioned reports the mapper of 0.16.0 and later, whose chunks are
// slices of destination-sorted edges (mapper_partitioned.go).
func (v Version) Partitioned() bool { return v.Minor >= 16 }

// EdgeSharded reports the model sharding of 0.17.0 and later: the
// mappers' and the graph-transformer processor's destination nodes and
// edges split over the model's GPUs, the processor exchanging halo nodes
// (shard_edges.go).
func (v Version) EdgeSharded() bool { return v.Minor >= 17 }

func (v Version) String() string {
	if v == (Version{}) {
		return "0.8.1"
	}
	return fmt.Sprintf("0.%d.%d", v.Minor, v.Patch)
}
