package baton

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"google.golang.org/grpc"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/embed/embedtest"
)

// fakeMember is the base of the scripted members these tests dial: it
// answers Status as the leader at its own address, and Unimplemented to
// everything its embedder does not serve.
type fakeMember struct {
	batonpb.UnimplementedBatonServer
	addr string
}

func (f *fakeMember) Status(context.Context, *batonpb.StatusRequest) (*batonpb.StatusResponse, error) {
	return &batonpb.StatusResponse{Name: "fake", Leader: "fake", Role: "leader", LeaderAddr: f.addr}, nil
}

func (f *fakeMember) setAddr(addr string) { f.addr = addr }

// fake is a scripted member: a Baton server that learns its address.
type fake interface {
	batonpb.BatonServer
	setAddr(string)
}

// serveFake serves f on a loopback port until the test ends and returns
// a client dialled to it.
func serveFake(t *testing.T, f fake) *Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveFakeOn(t, f, ln)
}

// serveFakeInMemory serves f on a network in memory (embedtest.Network),
// whose connections block on channels only, so that f and the client it
// returns run inside a synctest bubble.
func serveFakeInMemory(t *testing.T, f fake) *Client {
	t.Helper()
	network := embedtest.NewNetwork()
	ln, err := network.Listen("")
	if err != nil {
		t.Fatal(err)
	}
	return serveFakeOn(t, f, ln, WithDialer(network.Dial))
}

// serveFakeOn serves f on ln until the test ends and returns a client
// dialled to it with opts. A fake is a gRPC service only: its client's
// Sessions streams go over gRPC (WithGRPCSessionStreams).
func serveFakeOn(t *testing.T, f fake, ln net.Listener, opts ...Option) *Client {
	t.Helper()
	f.setAddr(ln.Addr().String())
	srv := grpc.NewServer()
	batonpb.RegisterBatonServer(srv, f)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return dial(t, ln.Addr().String(), append(opts, WithGRPCSessionStreams())...)
}

// scriptedMember serves Sessions: it answers every channel's open or
// resume with session 42, and the requests after it with answer (nil: no
// answer, as for a Close it never acknowledges).
type scriptedMember struct {
	fakeMember
	answer func(*batonpb.SessionRequest) *batonpb.SessionResponse
}

func (f *scriptedMember) Sessions(gs batonpb.Baton_SessionsServer) error {
	for {
		msg, err := gs.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var out []*batonpb.ChannelResponse
		for _, cr := range msg.GetRequests() {
			r := cr.GetRequest()
			var resp *batonpb.SessionResponse
			switch {
			case r == nil: // a detach
			case r.GetOpen() != nil || r.GetResume() != nil:
				resp = &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_Open{Open: &batonpb.OpenSessionResponse{
					SessionId: 42, Ttl: r.GetOpen().GetTtl(),
				}}}
			case f.answer != nil:
				resp = f.answer(r)
			}
			if resp != nil {
				resp.Id = r.GetId()
				out = append(out, &batonpb.ChannelResponse{Channel: cr.GetChannel(), Response: resp})
			}
		}
		if len(out) > 0 {
			if err := gs.Send(&batonpb.SessionsResponse{Responses: out}); err != nil {
				return err
			}
		}
	}
}
