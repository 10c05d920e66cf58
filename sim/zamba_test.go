package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/units"
)

// zamba (Zamba v1) is refused with its reason (ZambaMambaMixer's
// per-head Mamba-1 scans, which memsh has no layer for), not with the
// list of the model types memsh reads, and the hint names zamba2, which
// it reads. The config is ZambaConfig's (transformers 5.25.0) with the
// sizes cut down; transformers builds it (302,976 parameters on the meta
// device; two hybrid layers: 5.25.0 cannot build a Zamba with one, its
// _tied_weights_keys then matching no other shared_transf).
func TestZambaRefused(t *testing.T) {
	_, err := hf.FromConfig([]byte(`{"architectures": ["ZambaForCausalLM"], "model_type": "zamba", "hidden_size": 64,
		"num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 128,
		"n_mamba_heads": 2, "vocab_size": 256, "attn_layer_period": 2, "attn_layer_offset": 1}`), "sdpa")
	var ue *units.Error
	if !errors.As(err, &ue) || !strings.Contains(ue.Msg, `model_type "zamba" is not supported yet: Zamba v1's mixer (ZambaMambaMixer`) ||
		!strings.Contains(ue.Hint, `Zamba2 (model_type "zamba2") is read`) {
		t.Errorf("zamba: error %v", err)
	}
}
