package journal

import (
	"time"

	"github.com/tenure-go/tenure/tests/chaos/schedule"
)

// RunSpec is one run of a campaign.
type RunSpec struct {
	Backend  string        `json:"backend"`
	Seed     uint64        `json:"seed"`
	Duration time.Duration `json:"duration"`
	TTL      time.Duration `json:"ttl"`
	Workers  int           `json:"workers"`
	Slots    int           `json:"slots"`            // 0: a single claim
	Broken   string        `json:"broken,omitempty"` // every worker misbehaves this way
	// Transfers, if positive, is about how long into each term a leader
	// hands its claim to another worker (Elector.Transfer).
	Transfers time.Duration    `json:"transfers,omitempty"`
	Faults    []schedule.Fault `json:"faults"`
	// Settle is how much longer than TTL + 1s the backend may take to
	// serve again after a fault (see the settler of package servers).
	Settle time.Duration `json:"settle,omitempty"`
}
