package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"
)

// monitor polls /v1/status of every running member every 100ms. It
// counts the terms in which it saw a leader and checks Raft's election
// safety as far as polling can see it: no two members claim to lead in
// the same term.
type monitor struct {
	c      *cluster
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	leaders map[string]string // term -> leader name claimed by a member in role leader
	bad     []string
	current *leaderSeen
}

type leaderSeen struct {
	name       string
	clientAddr string
}

func startMonitor(c *cluster) *monitor {
	ctx, cancel := context.WithCancel(context.Background())
	m := &monitor{c: c, cancel: cancel, done: make(chan struct{}), leaders: map[string]string{}}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			m.poll(ctx)
			sleepCtx(ctx, 100*time.Millisecond)
		}
	}()
	return m
}

func (m *monitor) stop() {
	m.cancel()
	<-m.done
}

func (m *monitor) poll(ctx context.Context) {
	for _, nd := range m.c.nodes {
		if !nd.running() {
			continue
		}
		st, err := nd.status(ctx)
		if err != nil {
			continue
		}
		m.mu.Lock()
		if st.Role == "leader" {
			if prev, ok := m.leaders[st.Term]; ok && prev != st.Name {
				m.bad = append(m.bad, fmt.Sprintf("term %s: both %s and %s claimed to lead", st.Term, prev, st.Name))
			}
			m.leaders[st.Term] = st.Name
			m.current = &leaderSeen{name: st.Name, clientAddr: nd.clientAddr}
		}
		m.mu.Unlock()
	}
}

// leader is the member last seen leading (nil if none yet).
func (m *monitor) leader() *leaderSeen {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.current
}

// isLeader asks nd directly whether it leads now.
func (m *monitor) isLeader(nd *node) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := nd.status(ctx)
	return err == nil && (st.Role == "leader")
}

func (m *monitor) elections() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.leaders)
}

// terms lists the terms in which a leader was seen, ascending.
func (m *monitor) terms() []uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []uint64
	for t := range m.leaders {
		n, _ := strconv.ParseUint(t, 10, 64)
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func (m *monitor) violations() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.bad)
}
