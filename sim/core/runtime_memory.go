package core

import (
	"fmt"
	"slices"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// RuntimeMemory is how the libraries under PyTorch are set up, as far as
// it changes the device memory they hold outside PyTorch's allocator
// (replay/nccl.go, replay/device.go).
type RuntimeMemory struct {
	// NCCLBuffSize is NCCL_BUFFSIZE, the Simple protocol's buffer per
	// connection; 0 is NCCL's default, 4 MiB (src/init.cc DEFAULT_BUFFSIZE).
	NCCLBuffSize int64
	// NCCLNChannelsPerNetPeer is NCCL_NCHANNELS_PER_NET_PEER, the send/recv
	// channels for each peer on another node (replay/nccl_p2p.go); 0 is
	// NCCL's automatic choice (2, or 1 for many ranks).
	NCCLNChannelsPerNetPeer int64
	// NCCLNVLS is NCCL_NVLS_ENABLE: "auto" (the default: NVLink SHARP on
	// NVSwitch systems of Hopper and later), "on" or "off".
	NCCLNVLS string
	// NCCLConnect is when NCCL connects a communicator's algorithms:
	// "lazy" (NCCL_RUNTIME_CONNECT=1, the default since NCCL 2.22: at the
	// first collective that uses each), or "eager" (earlier NCCL, or
	// NCCL_RUNTIME_CONNECT=0: ring, tree and NVLS when the communicator is
	// made).
	NCCLConnect string
	// ModuleLoading is CUDA_MODULE_LOADING: "lazy" (the default since CUDA
	// 11.7, which PyTorch sets from 1.13 on: kernels load when first
	// launched) or "eager" (every kernel of every library at start).
	ModuleLoading string
	// CublasWorkspaceConfig is CUBLAS_WORKSPACE_CONFIG (":4096:8"): the
	// size of each cuBLAS workspace (cublas.go); "" is PyTorch's default
	// for the GPU.
	CublasWorkspaceConfig string
	// NCCLAvoidRecordStreams is TORCH_NCCL_AVOID_RECORD_STREAMS=1: on a
	// runtime whose ProcessGroupNCCL records a collective's tensors on its
	// stream (Runtime.NCCLRecordStreams: torch 2.7 and earlier) it stashes
	// them instead, and a freed block returns to its pool at once
	// (replay/nccl_record.go). Later runtimes stash whatever it says.
	NCCLAvoidRecordStreams bool
}

// Validate checks the settings' names and sizes.
func (m RuntimeMemory) Validate() error {
	for _, c := range []struct{ name, v, known string }{
		{"nccl_nvls", m.NCCLNVLS, "auto, on, off"},
		{"nccl_connect", m.NCCLConnect, "lazy, eager"},
		{"cuda_module_loading", m.ModuleLoading, "lazy, eager"},
	} {
		if c.v != "" && !slices.Contains(strings.Split(c.known, ", "), c.v) {
			return &units.Error{Path: "train", Msg: fmt.Sprintf("unknown %s %q (known: %s)", c.name, c.v, c.known)}
		}
	}
	if err := validateWorkspaceConfig(m.CublasWorkspaceConfig); err != nil {
		return err
	}
	if m.NCCLBuffSize < 0 || m.NCCLBuffSize > 1<<34 {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("nccl_buffsize must be between 0 and 16 GiB (got %d)", m.NCCLBuffSize),
			Hint: "NCCL_BUFFSIZE is bytes per connection; NCCL's default is 4194304 (4 MiB)"}
	}
	if m.NCCLNChannelsPerNetPeer < 0 || m.NCCLNChannelsPerNetPeer > 32 {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("nccl_nchannels_per_net_peer must be between 1 and 32 (got %d)", m.NCCLNChannelsPerNetPeer),
			Hint: "NCCL_NCHANNELS_PER_NET_PEER is channels per network peer, at most NCCL's 32 p2p channels; None is NCCL's automatic 2 (1 for many ranks)"}
	}
	return nil
}
