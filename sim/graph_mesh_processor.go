package sim

// MeshProcessor is the processor of an encoder-processor-decoder: layers
// over the hidden mesh's nodes whose layer norms take the ensemble noise.
// TransformerProcessor (attention over the nodes) and
// GraphTransformerProcessor (attention along the mesh's edges) are the
// two anemoi ships.
type MeshProcessor interface {
	Layer
	mesh() *NodeSet
	channels() int64
	// conditioned is a copy named "processor" unless named, whose layer
	// norms take cond noise channels (0: plain layer norms).
	conditioned(cond int64) MeshProcessor
	// lowerCond runs the processor on x [batch * mesh nodes, channels],
	// conditioned on cond [rows, noise channels] (noValue: no noise).
	lowerCond(b *builder, x, cond Value) Value
}

func (p *TransformerProcessor) mesh() *NodeSet  { return p.Mesh }
func (p *TransformerProcessor) channels() int64 { return p.Channels }

func (p *TransformerProcessor) conditioned(cond int64) MeshProcessor {
	c := *p
	c.Cond = cond
	if c.Name == "" {
		c.Name = "processor"
	}
	return &c
}
