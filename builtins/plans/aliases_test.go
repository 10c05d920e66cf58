package plans

import "testing"

// TestAliasesAreNotKeywords checks that no trainer's name the hints
// explain is a keyword the function takes (which would be refused).
func TestAliasesAreNotKeywords(t *testing.T) {
	for _, k := range TrainKeywords {
		if h := TrainAlias(k.Name, "1"); h != "" {
			t.Errorf("train keyword %q is taken as an alias: %s", k.Name, h)
		}
	}
	for _, name := range loraAttrNames {
		if h := loraAlias(name, "1"); h != "" {
			t.Errorf("lora keyword %q is taken as an alias: %s", name, h)
		}
	}
	for _, name := range []string{"impl", "fused", "in_backward", "momentum"} {
		if h := optimizerAlias(name, "1"); h != "" {
			t.Errorf("optimizer keyword %q is taken as an alias: %s", name, h)
		}
	}
}
