package baton

// The client's endpoints: those given to Dial, and the client addresses
// of the other members, learned from the cluster (as etcd's client does
// with its endpoint sync), so that one endpoint is enough and the death
// of a member does not strand the client.

import (
	"context"
	"errors"
	"slices"
	"syscall"
	"time"

	"github.com/batonlock/baton/api/rules"
)

// syncTimeout bounds one periodic sync; a sync that fails keeps the list
// it had.
const syncTimeout = 10 * time.Second

// endpointList is the client's endpoints. Guarded by Client.mu.
type endpointList struct {
	// given are the endpoints Dial was given, in their order; they stay
	// in the list whatever the cluster says (a member may come back). Set
	// by Dial and never changed: reading it needs no lock.
	given []string
	// learned maps a member's id to its client address, from the latest
	// Status that named the member with a usable address.
	learned map[uint64]string
	// all is given, then the learned addresses not among them, in the
	// order the cluster listed the members: what the client rotates over.
	all []string
}

// setMembers makes the learned endpoints those of members: a member that
// left is dropped; one named without a usable address (a member that
// has not told the answering one its address since that one started)
// keeps the address learned before, if any. An empty list (an answer
// that knows no members) changes nothing. It reports whether the list
// changed.
func (l *endpointList) setMembers(members []Member) bool {
	if len(members) == 0 {
		return false
	}
	learned := make(map[uint64]string, len(members))
	var order []string
	for _, m := range members {
		addr := m.ClientAddr
		if !usableAddr(addr) {
			addr = l.learned[m.ID]
		}
		if addr == "" {
			continue
		}
		learned[m.ID] = addr
		order = append(order, addr)
	}
	all := slices.Clone(l.given)
	for _, a := range order {
		if !slices.Contains(all, a) {
			all = append(all, a)
		}
	}
	l.learned = learned
	if slices.Equal(all, l.all) {
		return false
	}
	l.all = all
	return true
}

// usableAddr reports whether a client could dial addr, a member's client
// address as the cluster tells it (rules.CheckClientAddr): a member bound
// to 0.0.0.0 or [::] without --advertise-client-addr announces its bind
// address, which is nowhere to dial.
func usableAddr(addr string) bool { return rules.CheckClientAddr(addr) == nil }

// Endpoints returns the client's endpoints now: those given to Dial, then
// the client addresses of the cluster's other members as the client last
// learned them (at Dial, every sync interval, and at Sync; see
// WithSyncInterval). The client tries them in this order when it does
// not know the leader.
func (c *Client) Endpoints() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.eps.all)
}

// Sync asks the cluster for its members and updates Endpoints: members
// that joined are added, members that left are dropped, and the
// endpoints given to Dial stay. The client does it by itself at Dial and
// then every sync interval (WithSyncInterval).
func (c *Client) Sync(ctx context.Context) error {
	st, err := c.Status(ctx)
	if err != nil {
		return err
	}
	c.learn(st)
	return nil
}

// learn takes the members and the leader of a Status answer.
func (c *Client) learn(st *Status) {
	c.mu.Lock()
	changed := c.eps.setMembers(st.Members)
	all := slices.Clone(c.eps.all)
	c.mu.Unlock()
	c.setLeader(st.LeaderAddr)
	if changed {
		c.log.Info("endpoints changed", "endpoints", all)
	}
}

// syncLoop syncs the endpoints every interval until the client closes.
func (c *Client) syncLoop(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-c.runCtx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(c.runCtx, syncTimeout)
		if err := c.Sync(ctx); err != nil && c.runCtx.Err() == nil {
			c.log.Debug("endpoint sync failed; keeping the endpoints", "err", err)
		}
		cancel()
	}
}

// probeTimeout bounds the connection Dial opens to tell a member that
// refuses connections from one that fails otherwise.
const probeTimeout = time.Second

// refusedByAll is Dial's check after a call to addr found no member: it
// records whether addr, if it is an endpoint given to Dial, refuses
// connections now (a new connection to it is refused), and returns a
// *RefusedError once every given endpoint did. A connection that is not
// refused (a member that answers late, a timeout) takes addr out of the
// count, so only a cluster that is nowhere to be found fails fast. The
// probe needs to dial as gRPC does: with WithDialOptions alone the client
// cannot, and it never fails fast.
func (c *Client) refusedByAll(ctx context.Context, addr string, refusing *map[string]bool) error {
	if !slices.Contains(c.eps.given, addr) || c.cfg.opaqueDial && c.cfg.dialer == nil {
		return nil
	}
	if *refusing == nil {
		*refusing = make(map[string]bool, len(c.eps.given))
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	conn, err := c.dialPlain(pctx, addr)
	cancel()
	if err == nil {
		conn.Close()
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		delete(*refusing, addr)
		return nil
	}
	(*refusing)[addr] = true
	for _, a := range c.eps.given {
		if !(*refusing)[a] {
			return nil
		}
	}
	return &RefusedError{Addrs: slices.Clone(c.eps.given)}
}
