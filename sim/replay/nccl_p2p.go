package replay

import "fmt"

// NCCL's send/recv (p2p) buffers: the pipeline's sends and receives, ring
// attention's exchange and the all-to-all, which torch runs as grouped
// ncclSend/ncclRecv to every peer. From NCCL's source at v2.21.5-1 (torch
// 2.5 and 2.6) and v2.27.7-1 (the same code for all of what follows):
//
//   - Channels per peer: one figure per communicator,
//     p2pnChannelsPerPeer (src/graph/paths.cc ncclTopoComputeP2pChannels):
//     the smallest of p2pnChannels (the collective channels, at most
//     NCCL_MAX_P2P_NCHANNELS = 32) and of every peer's ncclTopoGetNchannels,
//     rounded up to a power of two. A peer in the node over NVLink counts
//     2 x its NVLinks (36 on H100, 24 on A100: more than the channels), one
//     over PCIe 2; a peer on another node NCCL_NCHANNELS_PER_NET_PEER, by
//     default 2, halved (to 1) while 2 x nRanks > 4 x p2pnChannels, and no
//     fewer than the NICs one GPU needs (1 on one-NIC-per-GPU nodes). So a
//     communicator that spans nodes gives its peers inside the node the
//     network's few channels too. NCCL's INIT lines agree: "8 p2p channels,
//     2 p2p channels per peer" on 2 nodes x 2 H20 (NVIDIA/nccl#1189), "4
//     p2p channels, 2 p2p channels per peer" on 2 GPUs over PCIe
//     (NVIDIA/nccl#1706), 32 channels per pair on 8 x H100 (#1685).
//   - Connected at the first send or receive to each peer, on all of its
//     channels (src/enqueue.cc, "Mark channels that need pre-connect":
//     connectSend/connectRecv for c < p2pnChannelsPerPeer), eager NCCL or
//     lazy: only the peers a rank talks to.
//   - A peer in the node (P2P transport, src/transport/p2p.cc p2pRecvSetup
//     and p2pSendSetup) holds full FIFOs of every protocol, as a ring's
//     connection does: the receiver maps ncclRecvMem + LL + LL128 + Simple
//     (10 MiB after the 2 MiB rounding), the sender ncclSendMem (2 MiB):
//     NCCL's ALLOC log in #1685 counts exactly these two sizes. A rank
//     sends to and receives from each peer: ncclConn per channel and peer.
//   - A peer on another node (NET transport, src/transport/net.cc
//     sendProxyConnect/recvProxyConnect with shared = 1: "Only allocate
//     dedicated buffers for ring/tree, not for p2p") shares one pool per
//     direction with every other remote peer: sharedNetBuffersInit sizes it
//     p2pnChannels x NCCL_SHARED_STEPS (16) x p2pChunkSize, the chunk being
//     NCCL_P2P_NET_CHUNKSIZE (128 KiB) across nodes (src/init.cc
//     computeBuffSizes), never more than NCCL_BUFFSIZE / NCCL_STEPS. The
//     pools are on the GPU with GPUDirect RDMA (the receive pool, and the
//     send pool through GDR reads, on by default from Ampere: src/graph/
//     paths.cc ncclTopoCheckGdr), in pinned host memory without it; no LL
//     buffers (NCCL_ALLOC_P2P_NET_LL_BUFFERS is 0). With PXN a rank's pool
//     may sit on the GPU of the node that owns the NIC: per GPU of the
//     node it comes to the same.
//   - Eager connection (the communicator's init before NCCL 2.22, and with
//     NCCL_RUNTIME_CONNECT=0 after) also makes the send pool at init on
//     every communicator (src/init.cc: ncclProxyMsgSharedInit to the local
//     net proxy with p2pnChannels; net.cc proxySharedInit allocates it on
//     the GPU), with the communicator's chunk: 512 KiB
//     (NCCL_P2P_NVL_CHUNKSIZE) in an all-NVLink node, 128 KiB otherwise.
//
// Assumed, not read from the topology: one NIC per GPU, GPUDirect RDMA, and
// NVLink to every peer of the node (not so on DGX-1 V100s or NVLink-bridged
// pairs, whose other peers get 2 channels).

const (
	ncclSharedSteps    = 16        // NCCL_SHARED_STEPS (src/transport/net.cc)
	ncclSteps          = 8         // NCCL_STEPS (src/include/device.h)
	ncclP2PNetChunk    = 128 << 10 // NCCL_P2P_NET_CHUNKSIZE's default
	ncclP2PNVLChunk    = 512 << 10 // NCCL_P2P_NVL_CHUNKSIZE's default
	ncclP2PPCIChunk    = 128 << 10 // NCCL_P2P_PCI_CHUNKSIZE's default
	ncclNetPeerChans   = 2         // NCCL_NCHANNELS_PER_NET_PEER's automatic start: 2 per NIC
	ncclP2PPCIChannels = 2         // ncclTopoGetNchannels for a peer not on NVLink
	ncclMaxChannels    = 32        // MAXCHANNELS, NCCL_MAX_P2P_NCHANNELS's default
)

// p2pComm is how NCCL lays out a communicator's send/recv buffers.
type p2pComm struct {
	channels int64 // p2pnChannels
	perPeer  int64 // p2pnChannelsPerPeer
	chunk    int64 // p2pChunkSize
}

// p2pLayout follows ncclTopoComputeP2pChannels and computeBuffSizes for
// communicator g (its collective channels ch).
func p2pLayout(g commGroup, ch, buf int64, nvlink bool, netPeerChans int64) p2pComm {
	channels := min(ch, ncclMaxChannels) // rounded up to a power of two below, after the peers' counts
	perPeer := channels
	if g.local > 1 && !nvlink {
		perPeer = min(perPeer, ncclP2PPCIChannels)
	}
	chunk := int64(ncclP2PPCIChunk)
	switch {
	case !g.intra:
		chunk = ncclP2PNetChunk
		net := netPeerChans // NCCL_NCHANNELS_PER_NET_PEER, when set
		if net <= 0 {
			net = ncclNetPeerChans
			for net*g.size > channels*4 && net > 1 {
				net /= 2
			}
		}
		perPeer = min(perPeer, net)
	case nvlink:
		chunk = ncclP2PNVLChunk
	}
	return p2pComm{channels: pow2Up(channels), perPeer: pow2Up(perPeer), chunk: min(chunk, buf/ncclSteps)}
}

// sharedPool is one direction's pool of p2p buffers for remote peers.
func (c p2pComm) sharedPool() int64 {
	return roundUp(c.channels*ncclSharedSteps*c.chunk, ncclGranularity)
}

// p2pMemory is what communicator g's send/recv to peers (every peer for an
// all-to-all, the two neighbours for a pipeline or ring attention) holds,
// and how, when word is set.
func p2pMemory(g commGroup, ch, buf int64, nvlink bool, netPeerChans int64, word bool) (int64, string) {
	c := p2pLayout(g, ch, buf, nvlink, netPeerChans)
	local, remote := p2pPeers(g)
	conn := ncclConn(buf)
	b := local * c.perPeer * conn
	how := ""
	if word {
		how = fmt.Sprintf("%d peer(s) in the node x %d channel(s) x %s", local, c.perPeer, mib(conn))
	}
	if remote > 0 {
		b += 2 * c.sharedPool()
		if word {
			how += fmt.Sprintf("; %d peer(s) on other nodes share a send and a receive pool of %d channels x %d steps x %s = %s each",
				remote, c.channels, ncclSharedSteps, mib(c.chunk), mib(c.sharedPool()))
		}
	}
	return b, how
}

// p2pPeers counts the peers communicator g sends to and receives from in
// the node and on other nodes: every peer for an all-to-all, the previous
// and the next rank otherwise.
func p2pPeers(g commGroup) (local, remote int64) {
	local, remote = g.local-1, g.size-g.local
	if g.pattern != "alltoall" {
		peers := min(g.size-1, 2)
		local = min(peers, local)
		remote = peers - local
	}
	return local, remote
}

// eagerSendPool is the send pool eager NCCL makes at communicator g's
// init (above), unless p2pMemory counts it already: a send/recv
// communicator with peers on other nodes uses that pool.
func eagerSendPool(g commGroup, ch, buf int64, nvlink bool) int64 {
	if _, remote := p2pPeers(g); remote > 0 && (g.pattern == "alltoall" || g.pattern == "p2p") {
		return 0
	}
	return p2pLayout(g, ch, buf, nvlink, 0).sharedPool() // the pool does not depend on the channels per peer
}

func pow2Up(n int64) int64 {
	p := int64(1)
	for p < n {
		p <<= 1
	}
	return p
}
