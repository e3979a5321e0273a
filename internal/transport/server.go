package transport

import (
	"io"
	"log/slog"
	"sync"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/batonlock/baton/internal/transport/transportpb"
)

// peerServer is the receiving side: it serves the streams peers open to us.
type peerServer struct {
	transportpb.UnimplementedPeerServer
	t *Transport
}

// inbound is one inbound stream from a peer. Only the newest stream of a
// peer delivers; mu serialises delivery between an old stream and its
// successor, so that once the successor has registered, the old one never
// calls Receive again.
type inbound struct {
	mu         *sync.Mutex // shared by all streams of one peer id
	superseded bool        // guarded by mu
}

func (ps *peerServer) Stream(s grpc.ClientStreamingServer[transportpb.Envelope, transportpb.StreamSummary]) error {
	t := ps.t
	env, err := s.Recv()
	if err != nil {
		return err
	}
	hello := env.GetHello()
	from := hello.GetId()
	if from == 0 || from == t.cfg.ID {
		return status.Errorf(codes.InvalidArgument, "stream must start with a Hello from another member, got id %d", from)
	}
	log := t.log.With("peer", from)
	in := t.register(from, hello)
	log.Debug("peer stream opened", "name", hello.GetName(), "peer_addr", hello.GetPeerAddr())

	for {
		env, err := s.Recv()
		if err == io.EOF {
			return s.SendAndClose(&transportpb.StreamSummary{})
		}
		if err != nil {
			return err // the peer went away or Stop; its sender reports it
		}
		if !ps.deliver(in, from, env, log) {
			return status.Error(codes.Aborted, "superseded by a newer stream from the same peer")
		}
	}
}

// register records hello and makes the stream the one that delivers for
// peer id, retiring the previous one.
func (t *Transport) register(id uint64, hello *transportpb.Hello) *inbound {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.info[id] = peerInfo{name: hello.GetName(), clientAddr: hello.GetClientAddr()}
	in := &inbound{mu: new(sync.Mutex)}
	if old := t.inbound[id]; old != nil {
		in.mu = old.mu
		old.mu.Lock()
		old.superseded = true
		old.mu.Unlock()
	}
	t.inbound[id] = in
	return in
}

// deliver hands env's messages to the Handler in order. It reports false
// when the stream has been superseded.
func (ps *peerServer) deliver(in *inbound, from uint64, env *transportpb.Envelope, log *slog.Logger) bool {
	t := ps.t
	group := env.GetGroupId()
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.superseded {
		return false
	}
	for _, b := range env.GetMessages() {
		m := new(raftpb.Message)
		if err := proto.Unmarshal(b, m); err != nil {
			log.Warn("dropped undecodable message", "err", err)
			continue
		}
		if m.GetFrom() != from || m.GetTo() != t.cfg.ID {
			log.Warn("dropped misaddressed message", "from", m.GetFrom(), "to", m.GetTo())
			continue
		}
		t.h.Receive(group, m)
	}
	return true
}
