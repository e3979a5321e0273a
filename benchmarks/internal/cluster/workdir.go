package cluster

import (
	"fmt"
	"os"
	"time"
)

// Workdir is a temporary directory for a command's builds and clusters.
type Workdir struct {
	Dir string
	// Keep leaves the directory at Close: asked for, or set when a run
	// failed, for its members' logs.
	Keep bool
}

// NewWorkdir makes a temporary directory named from prefix.
func NewWorkdir(prefix string, keep bool) (*Workdir, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	return &Workdir{Dir: dir, Keep: keep}, nil
}

// Close removes the directory unless w.Keep.
func (w *Workdir) Close() {
	if !w.Keep {
		os.RemoveAll(w.Dir)
	}
}

// CheckFlags checks the flags every command measuring with Measure has:
// rounds, the measured and warm-up durations, and the base port.
func CheckFlags(rounds int, duration, warmup time.Duration, basePort int) error {
	switch {
	case rounds < 1:
		return fmt.Errorf("-rounds %d: want at least 1", rounds)
	case duration <= 0 || warmup < 0:
		return fmt.Errorf("-duration %v, -warmup %v: want a positive duration and a warm-up of 0 or more", duration, warmup)
	case basePort < 1024 || basePort+21 > 65535:
		return fmt.Errorf("-port %d: want 1024 to 65514", basePort)
	}
	return nil
}
