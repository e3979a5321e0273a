package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/testnet"
	"github.com/batonlock/baton/internal/transport/transportpb"
)

// waitTimeout bounds every wait in these tests; they normally take
// milliseconds.
const waitTimeout = 10 * time.Second

type received struct {
	group uint64
	m     *raftpb.Message
}

type unreachable struct{ group, id uint64 }

// recorder is a Handler that forwards what it gets to channels. The
// channels are large and sends never block; an overflow fails the test.
type recorder struct {
	t    testing.TB
	msgs chan received
	unr  chan unreachable
}

func newRecorder(t testing.TB) *recorder {
	return &recorder{t: t, msgs: make(chan received, 1<<16), unr: make(chan unreachable, 1<<10)}
}

func (r *recorder) Receive(group uint64, m *raftpb.Message) {
	select {
	case r.msgs <- received{group, m}:
	default:
		r.t.Error("recorder: message channel overflow")
	}
}

func (r *recorder) ReportUnreachable(group, id uint64) {
	select {
	case r.unr <- unreachable{group, id}:
	default: // enough reports recorded
	}
}

// next returns the next received message or fails the test after
// waitTimeout.
func (r *recorder) next(t testing.TB) received {
	t.Helper()
	select {
	case got := <-r.msgs:
		return got
	case <-time.After(waitTimeout):
		t.Fatal("timed out waiting for a message")
		return received{}
	}
}

func (r *recorder) nextUnreachable(t testing.TB) unreachable {
	t.Helper()
	select {
	case got := <-r.unr:
		return got
	case <-time.After(waitTimeout):
		t.Fatal("timed out waiting for ReportUnreachable")
		return unreachable{}
	}
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// listen binds a loopback port outside the ephemeral range, so that a
// test can stop a transport and bind its address again.
func listen(t testing.TB) net.Listener {
	t.Helper()
	l, err := testnet.Listen()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// cluster starts n transports with ids 1..n on loopback, all peers of
// each other, and stops them when the test ends.
func cluster(t testing.TB, n int) ([]*Transport, []*recorder) {
	t.Helper()
	ls := make([]net.Listener, n)
	addrs := make(map[uint64]string, n)
	for i := range ls {
		ls[i] = listen(t)
		addrs[uint64(i+1)] = ls[i].Addr().String()
	}
	ts := make([]*Transport, n)
	rs := make([]*recorder, n)
	for i := range ts {
		id := uint64(i + 1)
		peers := make(map[uint64]string)
		for pid, a := range addrs {
			if pid != id {
				peers[pid] = a
			}
		}
		rs[i] = newRecorder(t)
		tr, err := StartListener(ls[i], config(t, id, peers), rs[i])
		if err != nil {
			t.Fatal(err)
		}
		ts[i] = tr
		t.Cleanup(tr.Stop)
	}
	return ts, rs
}

// named gives every peer in addrs the name config gives its id.
func named(addrs map[uint64]string) map[uint64]Peer {
	peers := make(map[uint64]Peer, len(addrs))
	for id, a := range addrs {
		peers[id] = Peer{Name: memberName(id), Addr: a}
	}
	return peers
}

// memberName is the name of member id in these tests.
func memberName(id uint64) string { return fmt.Sprintf("m%d", id) }

// config is member id's Config, with the members in peers (id to peer
// address) named by memberName.
func config(t testing.TB, id uint64, peers map[uint64]string) Config {
	var log *slog.Logger
	if _, ok := t.(*testing.T); ok {
		log = testLogger(t)
	}
	cfg := Config{
		Name:       memberName(id),
		ID:         id,
		ClientAddr: fmt.Sprintf("client-%d:2379", id),
		Peers:      named(peers),
		Logger:     log,
	}
	if id == 2 {
		cfg.LogVersion = 2 // m1 says none, as releases before log versions
	}
	return cfg
}

func msgApp(from, to, index uint64) *raftpb.Message {
	return &raftpb.Message{
		Type:    new(raftpb.MsgApp),
		From:    new(from),
		To:      new(to),
		Term:    new(uint64(1)),
		Index:   new(index),
		LogTerm: new(uint64(1)),
		Commit:  new(uint64(0)),
		Entries: []*raftpb.Entry{{Term: new(uint64(1)), Index: new(index + 1), Data: []byte("lock/a")}},
	}
}

func TestExchangeInOrder(t *testing.T) {
	const n, perPeer, batch = 3, 2000, 37
	ts, rs := cluster(t, n)

	// Every member sends perPeer messages to each other member, in
	// batches that mix destinations, plus messages to itself and to an
	// unknown id, which are dropped.
	var wg sync.WaitGroup
	for i, tr := range ts {
		from := uint64(i + 1)
		wg.Go(func() {
			var msgs []*raftpb.Message
			for idx := uint64(1); idx <= perPeer; idx++ {
				for to := uint64(1); to <= n; to++ {
					msgs = append(msgs, msgApp(from, to, idx))
				}
				msgs = append(msgs, msgApp(from, 99, idx))
				if len(msgs) >= batch || idx == perPeer {
					tr.Send(7, msgs)
					msgs = nil
				}
			}
		})
	}
	wg.Wait()

	for i, r := range rs {
		to := uint64(i + 1)
		next := make(map[uint64]uint64) // from -> next expected index
		for range (n - 1) * perPeer {
			got := r.next(t)
			from, idx := got.m.GetFrom(), got.m.GetIndex()
			if got.group != 7 || got.m.GetTo() != to || from == to {
				t.Fatalf("member %d got group %d %v", to, got.group, got.m)
			}
			if want := next[from] + 1; idx != want {
				t.Fatalf("member %d: from %d got index %d, want %d", to, from, idx, want)
			}
			next[from] = idx
		}
		for from := uint64(1); from <= n; from++ {
			if from != to && next[from] != perPeer {
				t.Errorf("member %d got %d messages from %d, want %d", to, next[from], from, perPeer)
			}
		}
	}
	for i, r := range rs {
		select {
		case u := <-r.unr:
			t.Errorf("member %d: unexpected ReportUnreachable %+v", i+1, u)
		default:
		}
	}
}

func TestPeerInfo(t *testing.T) {
	ts, rs := cluster(t, 2)
	if _, _, ok := ts[0].PeerInfo(3); ok {
		t.Error("PeerInfo of an unknown member is ok")
	}
	// The Hello comes first on a stream, so once a message from 2 has
	// arrived, 1 knows about 2.
	ts[1].Send(1, []*raftpb.Message{msgApp(2, 1, 1)})
	rs[0].next(t)
	name, clientAddr, ok := ts[0].PeerInfo(2)
	if !ok || name != "m2" || clientAddr != "client-2:2379" {
		t.Errorf("PeerInfo(2) = %q, %q, %v; want m2, client-2:2379, true", name, clientAddr, ok)
	}
	if v, ok := ts[0].PeerLogVersion(2); !ok || v != 2 {
		t.Errorf("PeerLogVersion(2) = %d, %v; want 2, true", v, ok)
	}
	if _, ok := ts[0].PeerLogVersion(3); ok {
		t.Error("PeerLogVersion of an unknown member is ok")
	}
	ts[0].Send(1, []*raftpb.Message{msgApp(1, 2, 1)})
	rs[1].next(t)
	if v, ok := ts[1].PeerLogVersion(1); !ok || v != 1 {
		t.Errorf("PeerLogVersion of a member whose Hello has no version = %d, %v; want 1, true", v, ok)
	}
}

func TestPeerRestart(t *testing.T) {
	ts, rs := cluster(t, 2)
	a := ts[0]
	ra := rs[0]
	addrB := ts[1].Addr().String()

	a.Send(1, []*raftpb.Message{msgApp(1, 2, 1)})
	if got := rs[1].next(t); got.m.GetIndex() != 1 {
		t.Fatalf("got %v", got.m)
	}

	ts[1].Stop()
	if u := ra.nextUnreachable(t); u != (unreachable{1, 2}) {
		t.Fatalf("ReportUnreachable%+v, want {1 2}", u)
	}

	l, err := net.Listen("tcp", addrB)
	if err != nil {
		t.Fatalf("relisten on %s: %v", addrB, err)
	}
	rb := newRecorder(t)
	b, err := StartListener(l, config(t, 2, map[uint64]string{1: a.Addr().String()}), rb)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()

	// Probe until the new member hears from 1 again: messages sent while
	// the stream is down are lost, as Raft expects.
	deadline := time.After(waitTimeout)
	probe := uint64(1000)
	for delivered := false; !delivered; {
		probe++
		a.Send(1, []*raftpb.Message{msgApp(1, 2, probe)})
		select {
		case <-rb.msgs:
			delivered = true
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			t.Fatal("no delivery after the peer restarted")
		}
	}

	// Delivery is in order again, after any late probes.
	var msgs []*raftpb.Message
	for i := uint64(1); i <= 100; i++ {
		msgs = append(msgs, msgApp(1, 2, i))
	}
	a.Send(1, msgs)
	want := uint64(1)
	for want <= 100 {
		got := rb.next(t).m.GetIndex()
		if got > probe {
			t.Fatalf("index %d: a probe arrived after a later message", got)
		}
		if got > 1000 {
			continue // a late probe
		}
		if got != want {
			t.Fatalf("got index %d, want %d", got, want)
		}
		want++
	}

	// And the other way round: the new member reaches the old one.
	b.Send(1, []*raftpb.Message{msgApp(2, 1, 5)})
	if got := ra.next(t); got.m.GetFrom() != 2 || got.m.GetIndex() != 5 {
		t.Fatalf("got %v", got.m)
	}
}

// Stop writes what is queued before it closes the connections: the
// last message of a member that stops on its own removal (the commit of
// that removal) may be the one the last other voter needs to elect
// itself. Each round sends a batch and stops at once, before the sender
// is likely to have run.
func TestStopWritesWhatIsQueued(t *testing.T) {
	for round := range 20 {
		ts, rs := cluster(t, 2)
		ts[0].Send(1, []*raftpb.Message{msgApp(1, 2, 1)})
		rs[1].next(t) // connected
		var msgs []*raftpb.Message
		for i := uint64(2); i <= 101; i++ {
			msgs = append(msgs, msgApp(1, 2, i))
		}
		ts[0].Send(1, msgs)
		ts[0].Stop()
		for want := uint64(2); want <= 101; want++ {
			if got := rs[1].next(t); got.m.GetIndex() != want {
				t.Fatalf("round %d: got index %d, want %d", round, got.m.GetIndex(), want)
			}
		}
	}
}

// Stop's flush is bounded for all peers together: two peers that accept
// the connection and never read keep their senders in a write, and Stop
// still returns after StopFlushTimeout, not after each write's own
// deadline (15 s) in turn.
func TestStopIsBoundedByPeersThatDoNotRead(t *testing.T) {
	peers := map[uint64]string{}
	for id := uint64(2); id <= 3; id++ {
		l := listen(t) // accepts (the kernel does) and never reads
		defer l.Close()
		peers[id] = l.Addr().String()
	}
	tr, err := StartListener(listen(t), config(t, 1, peers), newRecorder(t))
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 1<<20)
	for range 48 { // 48 MiB per peer: more than the sockets buffer
		var msgs []*raftpb.Message
		for id := range peers {
			m := msgApp(1, id, 1)
			m.Entries[0].Data = big
			msgs = append(msgs, m)
		}
		tr.Send(1, msgs)
	}
	stopWithin(t, tr, "Stop waited on each peer that does not read in turn")
}

func TestFullQueueDrops(t *testing.T) {
	// A peer that is down (its port refuses connections): the sender
	// keeps failing to connect and backing off, so nothing drains the
	// queue, and one Send of more than QueueSize messages must drop.
	hole := listen(t)
	down := hole.Addr().String()
	hole.Close()
	r := newRecorder(t)
	tr, err := StartListener(listen(t), config(t, 1, map[uint64]string{2: down}), r)
	if err != nil {
		t.Fatal(err)
	}

	msgs := make([]*raftpb.Message, QueueSize+100)
	for i := range msgs {
		msgs[i] = msgApp(1, 2, uint64(i))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tr.Send(1, msgs)
		tr.Send(1, msgs[:1])
	}()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatal("Send blocked on a full queue")
	}
	// A report per Send call that dropped, and per failed connection.
	for range 2 {
		if u := r.nextUnreachable(t); u != (unreachable{1, 2}) {
			t.Errorf("ReportUnreachable%+v, want {1 2}", u)
		}
	}

	stopWithin(t, tr, "Stop hung on a peer that never answers")
}

// stopWithin stops tr, failing the test with why if that takes longer
// than waitTimeout.
func stopWithin(t *testing.T, tr *Transport, why string) {
	t.Helper()
	stopped := make(chan struct{})
	go func() {
		tr.Stop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(waitTimeout):
		t.Fatal(why)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"ok", Config{ID: 1, Peers: map[uint64]Peer{2: {Addr: "h:1"}}}, ""},
		{"no peers", Config{ID: 1}, ""},
		{"zero id", Config{ID: 0}, "ID must not be 0"},
		{"zero peer id", Config{ID: 1, Peers: map[uint64]Peer{0: {Addr: "h:1"}}}, "peer ID must not be 0"},
		{"self in peers", Config{ID: 1, Peers: map[uint64]Peer{1: {Addr: "h:1"}}}, "own ID"},
		{"empty address", Config{ID: 1, Peers: map[uint64]Peer{2: {Name: "m2"}}}, "no address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

// countHandler counts received messages and wakes a waiter.
type countHandler struct {
	mu       sync.Mutex
	n        int
	progress chan struct{} // capacity 1
	dropped  chan struct{} // closed on the first ReportUnreachable
	once     sync.Once
}

func (h *countHandler) Receive(uint64, *raftpb.Message) {
	h.mu.Lock()
	h.n++
	h.mu.Unlock()
	select {
	case h.progress <- struct{}{}:
	default:
	}
}

func (h *countHandler) ReportUnreachable(uint64, uint64) {
	h.once.Do(func() { close(h.dropped) })
}

func (h *countHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// BenchmarkSend measures one-way throughput of small MsgApp messages (one
// 32-byte entry) from one transport to another, Send called with batch
// messages at a time. The sender keeps at most window messages
// outstanding so that the bounded queue never drops.
func BenchmarkSend(b *testing.B) {
	for _, batch := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			const window = QueueSize / 2
			la, lb := listen(b), listen(b)
			src := &countHandler{progress: make(chan struct{}, 1), dropped: make(chan struct{})}
			dst := &countHandler{progress: make(chan struct{}, 1), dropped: make(chan struct{})}
			ta, err := StartListener(la, config(b, 1, map[uint64]string{2: lb.Addr().String()}), src)
			if err != nil {
				b.Fatal(err)
			}
			defer ta.Stop()
			tb, err := StartListener(lb, config(b, 2, map[uint64]string{1: la.Addr().String()}), dst)
			if err != nil {
				b.Fatal(err)
			}
			defer tb.Stop()

			msgs := make([]*raftpb.Message, batch)
			for i := range msgs {
				msgs[i] = msgApp(1, 2, uint64(i))
				msgs[i].Entries[0].Data = make([]byte, 32)
			}
			size := 0
			for _, m := range msgs {
				size += proto.Size(m)
			}
			wait := func(target int) {
				for dst.count() < target {
					select {
					case <-dst.progress:
					case <-src.dropped:
						b.Fatal("messages dropped")
					case <-time.After(waitTimeout):
						b.Fatalf("stalled at %d of %d", dst.count(), target)
					}
				}
			}
			// Warm up the stream.
			ta.Send(1, msgs[:1])
			wait(1)
			sent := 1

			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if sent-dst.count() > window {
					wait(sent - window/2)
				}
				ta.Send(1, msgs)
				sent += batch
			}
			wait(sent)
			b.ReportMetric(float64(sent-1)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// TestRefusesStrangers: a connection that does not start with the preface
// and a Hello from another member, or that announces a frame over the
// limit, is closed without anything reaching the Handler.
func TestRefusesStrangers(t *testing.T) {
	ts, rs := cluster(t, 1)
	addr := ts[0].Addr().String()
	hello := func(id uint64) []byte {
		b, err := proto.Marshal(&transportpb.Envelope{Hello: &transportpb.Hello{Name: "x", Id: id}})
		if err != nil {
			t.Fatal(err)
		}
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
	}
	frame, _, err := appendFrame(nil, []queued{{group: 1, m: msgApp(2, 1, 7)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		send []byte
	}{
		{"an HTTP/2 client (a member of an older release)", []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")},
		{"no Hello first", append([]byte(preface), frame...)},
		{"a Hello from this member's own id", append([]byte(preface), hello(1)...)},
		{"a frame over the limit", append(append([]byte(preface), hello(2)...), binary.BigEndian.AppendUint32(nil, MaxMessageBytes+1)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			if err := c.SetReadDeadline(time.Now().Add(waitTimeout)); err != nil {
				t.Fatal(err)
			}
			var b [1]byte
			if _, err := c.Read(b[:]); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("read after sending %s: %v, want the connection closed", tc.name, err)
			}
		})
	}
	select {
	case got := <-rs[0].msgs:
		t.Fatalf("a stranger's message reached the Handler: %v", got.m)
	default:
	}
}

// SetPeers: a member added later gets messages, a dropped one no more.
func TestSetPeers(t *testing.T) {
	ts, rs := cluster(t, 2)
	a := ts[0]
	lc := listen(t)
	rc := newRecorder(t)
	c, err := StartListener(lc, config(t, 3, map[uint64]string{1: a.Addr().String()}), rc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	a.Send(1, []*raftpb.Message{msgApp(1, 3, 5)}) // unknown yet: dropped
	a.SetPeers(named(map[uint64]string{2: ts[1].Addr().String(), 3: lc.Addr().String()}))
	a.Send(1, []*raftpb.Message{msgApp(1, 3, 6), msgApp(1, 2, 7)})
	if got := rc.next(t); got.m.GetIndex() != 6 {
		t.Fatalf("the added peer got index %d first, want 6", got.m.GetIndex())
	}
	if got := rs[1].next(t); got.m.GetIndex() != 7 {
		t.Fatalf("the kept peer got %d, want 7", got.m.GetIndex())
	}
	a.SetPeers(named(map[uint64]string{3: lc.Addr().String()}))
	a.Send(1, []*raftpb.Message{msgApp(1, 2, 8), msgApp(1, 3, 9)})
	if got := rc.next(t); got.m.GetIndex() != 9 {
		t.Fatalf("got %d, want 9", got.m.GetIndex())
	}
	select {
	case got := <-rs[1].msgs:
		t.Fatalf("a dropped peer got %+v", got)
	default: // 8 was dropped in Send (no peer 2), before 9 was queued
	}
}

// A member that still sends after its removal is told so and its
// connection closed; nothing it sends is delivered.
func TestRemovedPeerIsTold(t *testing.T) {
	la, lb := listen(t), listen(t)
	told := make(chan struct{}, 4)
	ca := config(t, 1, map[uint64]string{2: lb.Addr().String()})
	ca.OnRemoved = func() { told <- struct{}{} }
	rb := newRecorder(t)
	b, err := StartListener(lb, config(t, 2, map[uint64]string{1: la.Addr().String()}), rb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	b.SetRemoved([]uint64{1})
	a, err := StartListener(la, ca, newRecorder(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	a.Send(1, []*raftpb.Message{msgApp(1, 2, 5)})
	select {
	case <-told:
	case <-time.After(waitTimeout):
		t.Fatal("the removed member was not told")
	}
	select {
	case got := <-rb.msgs:
		t.Fatalf("a removed member's message was delivered: %+v", got)
	default:
	}
}

// Members whose Hellos name different clusters exchange nothing; a
// member that does not know its cluster yet (0) is let in.
func TestOtherClusterRefused(t *testing.T) {
	la, lb, lc := listen(t), listen(t), listen(t)
	ca := config(t, 1, map[uint64]string{2: lb.Addr().String()})
	ca.ClusterID = func() uint64 { return 111 }
	cb := config(t, 2, map[uint64]string{1: la.Addr().String(), 3: lc.Addr().String()})
	cb.ClusterID = func() uint64 { return 222 }
	cc := config(t, 3, map[uint64]string{2: lb.Addr().String()}) // joining: no id yet
	ra, rb, rc := newRecorder(t), newRecorder(t), newRecorder(t)
	b, err := StartListener(lb, cb, rb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	a, err := StartListener(la, ca, ra)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	c, err := StartListener(lc, cc, rc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	a.Send(1, []*raftpb.Message{msgApp(1, 2, 5)})
	if u := ra.nextUnreachable(t); u != (unreachable{1, 2}) {
		t.Fatalf("ReportUnreachable%+v, want {1 2}", u)
	}
	b.Send(1, []*raftpb.Message{msgApp(2, 1, 6)})
	if u := rb.nextUnreachable(t); u != (unreachable{1, 1}) {
		t.Fatalf("ReportUnreachable%+v, want {1 1}", u)
	}
	c.Send(1, []*raftpb.Message{msgApp(3, 2, 7)})
	if got := rb.next(t); got.m.GetIndex() != 7 {
		t.Fatalf("b got %+v from the joining member, want index 7", got)
	}
	select {
	case got := <-rb.msgs:
		t.Fatalf("b got a message from another cluster: %+v", got)
	case got := <-ra.msgs:
		t.Fatalf("a got a message from another cluster: %+v", got)
	default:
	}
}
