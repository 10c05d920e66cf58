package replay

import "testing"

// TestP2PLayout: NCCL's send/recv channels against the INIT lines of
// public logs ("N p2p channels, M p2p channels per peer") and the chunk
// computeBuffSizes picks (src/init.cc, src/graph/paths.cc at v2.21.5-1).
func TestP2PLayout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		g       commGroup
		ch      int64 // the collective channels
		nvlink  bool
		netPeer int64 // NCCL_NCHANNELS_PER_NET_PEER (0: automatic)
		want    p2pComm
	}{
		// NVIDIA/nccl#1189: 2 nodes x 2 H20, "8 coll channels, ... 8 p2p channels, 2 p2p
		// channels per peer"; across nodes the chunk is NCCL_P2P_NET_CHUNKSIZE.
		{"nccl#1189", commGroup{size: 4, local: 2}, 8, true, 0, p2pComm{channels: 8, perPeer: 2, chunk: 128 << 10}},
		// NVIDIA/nccl#1706: 2 GPUs over PCIe, "4 coll channels, ... 4 p2p channels, 2 p2p
		// channels per peer".
		{"nccl#1706", commGroup{size: 2, local: 2, intra: true}, 4, false, 0, p2pComm{channels: 4, perPeer: 2, chunk: 128 << 10}},
		// NVIDIA/nccl#1685: 8 H100s, 32 channels per pair; NCCL_P2P_NVL_CHUNKSIZE.
		{"nccl#1685", commGroup{size: 8, local: 8, intra: true}, 32, true, 0, p2pComm{channels: 32, perPeer: 32, chunk: 512 << 10}},
		// 64 ranks over 8 nodes: 2 x 64 > 4 x 16 halves the network's 2 channels to 1.
		{"64 ranks", commGroup{size: 64, local: 8}, 16, true, 0, p2pComm{channels: 16, perPeer: 1, chunk: 128 << 10}},
		// A channel count that is not a power of two rounds up (24 -> 32).
		{"24 channels", commGroup{size: 8, local: 8, intra: true}, 24, true, 0, p2pComm{channels: 32, perPeer: 32, chunk: 512 << 10}},
		// NCCL_NCHANNELS_PER_NET_PEER=4 replaces the automatic choice (no halving); 3 rounds up to 4.
		{"64 ranks, 4 per net peer", commGroup{size: 64, local: 8}, 16, true, 4, p2pComm{channels: 16, perPeer: 4, chunk: 128 << 10}},
		{"64 ranks, 3 per net peer", commGroup{size: 64, local: 8}, 16, true, 3, p2pComm{channels: 16, perPeer: 4, chunk: 128 << 10}},
		// It is no help inside a node.
		{"in a node, 4 per net peer", commGroup{size: 8, local: 8, intra: true}, 32, true, 4, p2pComm{channels: 32, perPeer: 32, chunk: 512 << 10}},
	} {
		if got := p2pLayout(tc.g, tc.ch, ncclSimple, tc.nvlink, tc.netPeer); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
