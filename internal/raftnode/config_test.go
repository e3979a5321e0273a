package raftnode

import (
	"strings"
	"testing"
)

// TestValidateRefusesEmptyQueues: a queue bound of zero or less would make
// every proposal, read or peer message overflow; Validate names the field.
func TestValidateRefusesEmptyQueues(t *testing.T) {
	for _, tt := range []struct {
		name string
		set  func(*Config)
	}{
		{"MaxBatch", func(c *Config) { c.MaxBatch = 0 }},
		{"MaxInFlight", func(c *Config) { c.MaxInFlight = -1 }},
		{"MaxInbound", func(c *Config) { c.MaxInbound = 0 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.ID, cfg.Peers, cfg.Store, cfg.Transport = 1, []uint64{1}, &memStore{}, &memNet{nodes: map[uint64]*Node{}}
			if err := cfg.Validate(); err != nil {
				t.Fatalf("the default config with an ID, peers, a store and a transport: %v", err)
			}
			tt.set(&cfg)
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.name) {
				t.Fatalf("Validate with %s out of range = %v, want an error naming it", tt.name, err)
			}
		})
	}
}
