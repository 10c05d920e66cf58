package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/units"
)

// jetmoe is refused with its reason (JetMoeAttention's mixture of
// attention heads, which memsh has no layer for), not with the list of
// the model types memsh reads; its config is JetMoeConfig's (transformers
// 5.25.0) with the sizes cut down.
func TestJetMoeRefused(t *testing.T) {
	_, err := hf.FromConfig([]byte(`{"architectures": ["JetMoeForCausalLM"], "model_type": "jetmoe", "hidden_size": 64,
		"num_hidden_layers": 2, "num_key_value_heads": 2, "kv_channels": 16, "intermediate_size": 128,
		"num_local_experts": 4, "num_experts_per_tok": 2, "vocab_size": 256}`), "sdpa")
	var ue *units.Error
	if !errors.As(err, &ue) || !strings.Contains(ue.Msg, `model_type "jetmoe" is not supported yet: JetMoE's mixture of attention heads`) ||
		!strings.Contains(ue.Hint, "building blocks") {
		t.Errorf("jetmoe: error %v", err)
	}
}
