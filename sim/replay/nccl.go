package replay

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
)

// NCCL's device memory, per communicator, outside PyTorch's allocator.
//
//   - A connection holds a FIFO per protocol (src/init.cc): Simple
//     NCCL_BUFFSIZE (4 MiB), LL128 120*640*8*8 = 4,915,200 B, LL
//     8*512*8*16 = 512 KiB. Since NCCL 2.19 buffers are cuMem
//     allocations, rounded up to the 2 MiB granularity: NCCL's ALLOC log
//     on 8 x H100 shows 10 MiB (the receiver's FIFOs) and 2 MiB (the
//     sender's ncclSendMem) per channel and peer (NVIDIA/nccl#1685), 12
//     MiB per connection (ncclConn).
//   - Ring: each rank receives from one peer and sends to another on
//     every channel: one connection's buffers per channel (the P2P
//     transport splits them between sender and receiver). Tree: a parent
//     and a child, up and down: two per channel. All-to-all and send/recv:
//     p2p connections per peer (nccl_p2p.go): inside a node every peer on
//     every channel (#1685), across nodes few channels per peer and shared
//     pools for the remote peers.
//   - NVLink SHARP (NVLS, Hopper and later on NVSwitch, more than two
//     ranks in a node): every rank binds nvlsChannels x 2 x (NCCL_BUFFSIZE
//     + 2 MiB) per rank of the node to the multicast object; NCCL's INIT
//     log on 8 x H200 reads "NVLS comm ... nHeads 8 buffSize 4194304
//     memSize 2097152 nvlsPerRankSize 301989888 nvlsTotalSize 2415919104"
//     (vllm-project/vllm#9699): 24 channels x 2 x 6 MiB per head, 2.25 GiB
//     per GPU. It is why NeMo's launcher and JAX-Toolbox set
//     NCCL_NVLS_ENABLE=0 "for memory saving" (NVIDIA/NeMo-Framework-
//     Launcher#127, NVIDIA/JAX-Toolbox#383).
//   - What is connected: with lazy connection (NCCL_RUNTIME_CONNECT=1, the
//     default from NCCL 2.22) only the algorithms the communicator's
//     collectives use: rings for all of them, trees for all-reduce across
//     nodes, NVLS for large all-reduce where it is supported; eager
//     connection (earlier NCCL) sets up rings, trees and NVLS when the
//     communicator is made, on every communicator, an all-to-all's or a
//     pipeline's too (their peers' buffers come on top at first use),
//     and the p2p send pool for network peers (nccl_p2p.go).
//     The memory is linear in the channels (sjeaugey in NVIDIA/nccl#864
//     and #986). torch 2.5 and 2.6 wheels bundle NCCL 2.21.5
//     (nvidia-nccl-cu12==2.21.5 in their install requirements): eager.
//
//   - What every communicator holds from its init, connected or not
//     (src/channel.cc initChannel l.42-56 and src/init.cc devCommSetup
//     l.447-449 at v2.27.7-1; the same calls at v2.21.5-1): per channel
//     the peers' device structures (sharedRes->devPeers), the channel's
//     pointers to them (devPeers) and its ring's ranks (devRingUserRanks),
//     three small allocations, and once the device communicator and its
//     rank-to-local-rank map; initChannel runs for every collective
//     channel and every p2p channel beyond them (src/graph/paths.cc
//     l.870), pow2Up of the collective channels. With cuMem (NCCL_CUMEM_
//     ENABLE's default -2: on where the driver supports it, from 2.19,
//     src/misc/cudawrap.cc) each is rounded up to the 2 MiB allocation
//     granularity (src/include/alloc.h ncclCuMemAlloc, ALIGN_SIZE): (3 x
//     channels + 2) x 2 MiB, 100 MiB at 16 channels, 196 MiB at 32
//     (ncclInitMem). Not counted: NVLS channels' peers (initNvlsChannel).
//
// Check against a measurement not used to build it: 4 x A100 on NVLink,
// NCCL of mid-2023 (eager), one all-reduce per process group: 544 MB for
// two-rank groups, 688 MB for larger ones (NVIDIA/nccl#964); this model
// gives rings and trees on 16 channels, 16 x 3 x 12 MiB = 604 MB for
// either (TestNCCLMemory).

const (
	ncclSimple      = 4 << 20   // NCCL_BUFFSIZE's default (DEFAULT_BUFFSIZE)
	ncclLL128       = 4_915_200 // DEFAULT_LL128_BUFFSIZE
	ncclLL          = 512 << 10 // DEFAULT_LL_BUFFSIZE
	ncclGranularity = 2 << 20   // cuMem's allocation granularity, and CUDA_IPC_MIN
	ncclMemAlign    = 4096      // MEM_ALIGN: sizeof(ncclRecvMem), sizeof(ncclSendMem) (src/include/comm.h)
	ncclNVLSMem     = 2 << 20   // NVLS credit memory per channel and direction (memSize in NCCL's INIT log)
	ncclNVLSChans   = 24        // NVLS channels in vllm-project/vllm#9699's log (nvlsPerRankSize / 2 / 6 MiB)
	ncclChannelMems = 3         // initChannel's device allocations per channel: sharedRes->devPeers, devPeers, devRingUserRanks
	ncclCommMems    = 2         // devCommSetup's: devCommAndChans, rankToLocalRank
)

// ncclInitMem is what a communicator of ch collective channels holds
// from its init (above): initChannel's allocations on pow2Up(ch)
// channels and devCommSetup's, each a 2 MiB cuMem allocation.
func ncclInitMem(ch int64) int64 {
	return (ncclChannelMems*pow2Up(ch) + ncclCommMems) * ncclGranularity
}

// ncclOneRankChannels is the channels NCCL opens on a communicator of one
// rank: ncclTopoSearchInit gives a lone GPU LOC_BW (src/graph/search.cc
// l.37-44 at v2.21.5-1), the ring search at its first
// speed fills maxChannels (MAXCHANNELS/2, init.cc l.1051) through the
// GPU's path to itself, ncclTopoDupChannels keeps 16 (capped by
// maxChannels) and ncclTopoPostset doubles them (connect.cc l.443).
const ncclOneRankChannels = 32

// ncclOneRank is what a communicator of one rank holds: no ring or tree is
// connected (init.cc l.1260 and l.1269 at v2.21.5-1) and its collectives
// are local copies (enqueue.cc l.1961), but initChannel runs on every
// channel (setupChannel before the check, l.1258) and eager NCCL still
// makes the p2p send pool (init.cc l.1370, transport/net.cc
// sharedNetBuffersInit l.483-511: channels x NCCL_SHARED_STEPS x the p2p
// chunk, PCI's 128 KiB since ncclTopoPathAllNVLink finds no GPU pair,
// paths.cc l.795-805 and init.cc l.564-566).
func ncclOneRank(eager, word bool) (int64, string) {
	ch := int64(ncclOneRankChannels)
	b := ncclInitMem(ch)
	how := ""
	if word {
		how = fmt.Sprintf("one rank: nothing connected; init: (%d x %d channels + %d) x 2 MiB = %s", ncclChannelMems, ch, ncclCommMems, mib(b))
	}
	if eager {
		pool := roundUp(ch*ncclSharedSteps*ncclP2PPCIChunk, ncclGranularity)
		b += pool
		if word {
			how += fmt.Sprintf("; the p2p send pool made at init: %d channels x %d steps x %s = %s", ch, ncclSharedSteps, mib(ncclP2PPCIChunk), mib(pool))
		}
	}
	return b, how
}

// ncclBuffSize is the plan's NCCL_BUFFSIZE.
func ncclBuffSize(p *core.Plan) int64 {
	if b := p.RuntimeMemory.NCCLBuffSize; b > 0 {
		return b
	}
	return ncclSimple
}

// ncclConn is one connection's buffers over NVLink or PCIe (src/transport/
// p2p.cc p2pRecvSetup and p2pSendSetup at v2.21.5-1): the receiver's
// ncclRecvMem (MEM_ALIGN, 4 KiB) and the LL, LL128 and Simple FIFOs in one
// allocation, the sender's ncclSendMem in another, each rounded up to
// CUDA_IPC_MIN (2 MiB): the 10 MiB and 2 MiB of NCCL's ALLOC log in #1685
// (H100). With P2P read (Ampere over NVLink) the Simple FIFO moves to the
// sender's allocation: 6 + 6 MiB, the same 12 MiB at the default sizes.
func ncclConn(buffSize int64) int64 {
	return roundUp(ncclMemAlign+ncclLL+ncclLL128+buffSize, ncclGranularity) + roundUp(ncclMemAlign, ncclGranularity)
}

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }

// ncclChannels estimates the channels NCCL opens on a communicator: 32
// (MAXCHANNELS) on NVLink4/5 nodes (Hopper, Blackwell), 16 on older NVLink,
// 4 over PCIe, 16 across nodes (2 per NIC on 8-NIC nodes).
func ncclChannels(d hw.Device, intra bool) int64 {
	switch {
	case !intra:
		return 16
	case d.LinkGBps >= 400:
		return 32
	case d.LinkGBps > 0:
		return 16
	}
	return 4
}

// nvlsCapable reports whether NCCL uses NVLS on a communicator of size
// ranks: Hopper and later behind NVSwitch (NVLink4/5 at 400 GB/s and
// more per direction), more than two ranks, all in one node (sjeaugey in
// NVIDIA/nccl-tests#228: "NVLS was a new feature of H100"), unless turned
// off.
func nvlsCapable(p *core.Plan, size int64, intra bool) bool {
	switch p.RuntimeMemory.NCCLNVLS {
	case "off":
		return false
	case "on":
		return size > 2 && intra
	}
	return size > 2 && intra && p.Device.LinkGBps >= 400
}

// allReduces reports whether communicator name runs large all-reduces:
// DDP's and Megatron's gradient buckets (without the distributed
// optimizer), HSDP's replicas, tensor parallelism without sequence
// parallelism. FSDP, ZeRO and the distributed optimizer reduce-scatter
// and all-gather.
func allReduces(p *core.Plan, name string) bool {
	par := p.Parallel.Norm()
	switch name {
	case "tp":
		return !par.SequenceParallel
	case "dp_replicate":
		return true
	case "dp":
		return !par.FSDP && par.Zero == 0 && !par.DistributedOptimizer
	case "embd": // Megatron's embedding gradient (nccl_megatron.go)
		return true
	}
	return false
}

// ncclComm is what communicator g's memory reads of a plan: a replay
// keeps it in the communicator's Overhead and words how the memory is
// made up only when the Overhead's source is read (ncclComm.source).
type ncclComm struct {
	g            commGroup
	buf          int64 // NCCL_BUFFSIZE (ncclBuffSize)
	ch           int64 // its channels (ncclChannels)
	nvlink       bool  // the GPUs have NVLink
	eager        bool  // connected at init (NCCL_RUNTIME_CONNECT=0)
	nvls         bool  // NVLS may serve it (nvlsCapable)
	allReduce    bool  // it runs large all-reduces (allReduces)
	netPeerChans int64 // NCCL_NCHANNELS_PER_NET_PEER (nccl_p2p.go)
}

// ncclCommOf is communicator g of plan p.
func ncclCommOf(p *core.Plan, g commGroup) ncclComm {
	return ncclComm{g: g, buf: ncclBuffSize(p), ch: ncclChannels(p.Device, g.intra), nvlink: p.Device.LinkGBps > 0,
		eager: p.RuntimeMemory.NCCLConnect == "eager", nvls: nvlsCapable(p, g.size, g.intra), allReduce: allReduces(p, g.name),
		netPeerChans: p.RuntimeMemory.NCCLNChannelsPerNetPeer}
}

// source is communicator c's Overhead.Source.
func (c *ncclComm) source() string {
	_, how := c.memory(true)
	where := "inside a node"
	if !c.g.intra {
		where = "across nodes"
	}
	return fmt.Sprintf("NCCL buffers of the %s communicator (%d ranks, %s): %s; an estimate (replay/nccl.go: src/init.cc buffer sizes, NCCL_BUFFSIZE)", c.g.name, c.g.size, where, how)
}

// memory is communicator c's device memory and, when word is set, how it
// is made up.
func (c *ncclComm) memory(word bool) (int64, string) {
	g := c.g
	if g.size == 1 {
		return ncclOneRank(c.eager, word)
	}
	buf, ch, eager := c.buf, c.ch, c.eager
	conn := ncclConn(buf)
	initMem := ncclInitMem(ch)
	initHow := ""
	if word {
		initHow = fmt.Sprintf("; init: (%d x %d channels + %d) x 2 MiB = %s", ncclChannelMems, pow2Up(ch), ncclCommMems, mib(initMem))
	}
	// Eager connection sets up the ring and the tree at the
	// communicator's creation whatever it is used for: an all-to-all's or
	// a pipeline's communicator holds them beside its peers' buffers.
	initRT, rtHow := int64(0), ""
	if eager {
		initRT = ch * 3 * conn
		if word {
			rtHow = fmt.Sprintf("; ring and tree connected at init: %d channels x 3 x %s", ch, mib(conn))
		}
		if pool := eagerSendPool(g, ch, buf, c.nvlink); pool > 0 { // nccl_p2p.go
			initRT += pool
			if word {
				rtHow += fmt.Sprintf("; the p2p send pool made at init: %s", mib(pool))
			}
		}
	}
	if g.pattern == "alltoall" || g.pattern == "p2p" {
		b, how := p2pMemory(g, ch, buf, c.nvlink, c.netPeerChans, word) // nccl_p2p.go
		return b + initRT + initMem, how + rtHow + initHow
	}
	ar := c.allReduce
	conns := int64(1) // the ring
	how := "ring"
	if eager || (ar && !g.intra) {
		conns += 2 // the tree, up and down
		how = "ring and tree"
	}
	b := ch * conns * conn
	if word {
		how = fmt.Sprintf("%s: %d channels x %d connection(s) x %s", how, ch, conns, mib(conn))
	}
	if c.nvls && (eager || ar) {
		nvls := ncclNVLSChans * 2 * (buf + ncclNVLSMem) * g.size
		b += nvls
		if word {
			how += fmt.Sprintf("; NVLS: %d channels x 2 x (%s + 2 MiB) x %d ranks = %s", ncclNVLSChans, mib(buf), g.size, mib(nvls))
		}
	}
	if eager {
		pool := eagerSendPool(g, ch, buf, c.nvlink)
		b += pool
		if word {
			how += fmt.Sprintf("; the p2p send pool made at init: %s", mib(pool))
		}
	}
	return b + initMem, how + initHow
}

// mib formats whole or fractional MiB.
func mib(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
}
