package server

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/batonlock/baton/api/batonpb"
	"github.com/batonlock/baton/internal/fsm"
	"github.com/batonlock/baton/internal/fsm/fsmpb"
)

// channel is one session served on a Sessions stream: its requests come
// in order from the stream's receiver (route, serve), and every answer and
// push for it goes out through hub.send onto the stream's one queue.
type channel struct {
	id     uint64 // the client's number for it on the stream
	stream *sessionsStream
	ctx    context.Context // ends with the channel: its keepalives stop
	cancel context.CancelFunc

	// The session, set by attach before the hub or the receiver can see
	// the channel, then read only. secret is the hash of the secret its
	// first request showed, and principal the user the stream
	// authenticated as (empty while authentication is off): every command
	// of the channel carries both to the state machine.
	session   uint64
	secret    fsm.SecretHash
	principal string
	closing   atomic.Bool // the client asked to close the session

	// Guarded by stream.mu.
	serving  bool                      // attached: requests go to serve
	pending  []*batonpb.SessionRequest // requests that came while attaching
	detached bool                      // the client detached while attaching
	ended    bool                      // its end is queued: nothing more is sent
}

// answer sends r (nil: an empty response) as the answer to req, with err
// as its error; later as for hub.send.
func (s *Server) answer(ch *channel, req *batonpb.SessionRequest, r *batonpb.SessionResponse, err error, later bool) {
	s.answerSigned(ch, req, r, err, later, nil)
}

// answerSigned is answer, with the mode of the grants r carries when the
// sender is to sign them (nil: it signs nothing).
func (s *Server) answerSigned(ch *channel, req *batonpb.SessionRequest, r *batonpb.SessionResponse, err error, later bool, sign *grantMode) {
	if r == nil {
		r = &batonpb.SessionResponse{}
	}
	r.Id = req.GetId()
	r.Error = s.toWire(err)
	s.hub.send(reply{ch: ch, resp: r, sign: sign}, later)
}

// serve starts one request of an attached channel. Keepalives and
// renewals are answered from goroutines of their own (keepalive.go).
// Mutating requests are submitted to the log here, in the order they
// arrived on the channel, and answered from the Ready loop when they apply
// (call.Complete): the channel is pipelined but ordered.
func (s *Server) serve(ch *channel, req *batonpb.SessionRequest) {
	var c *call
	switch k := req.GetKind().(type) {
	case *batonpb.SessionRequest_KeepAlive:
		go s.channelKeepAlive(ch, req) // ends with ch.ctx
		return
	case *batonpb.SessionRequest_RenewHold:
		go s.channelRenewHold(ch, req, k.RenewHold) // ends with ch.ctx
		return
	case *batonpb.SessionRequest_Acquire:
		ac := &acquireCall{}
		ac.acq = &ac.ans
		c = &ac.call
	case *batonpb.SessionRequest_Release:
		rc := &releaseCall{}
		rc.rel = &rc.ans
		c = &rc.call
	default:
		c = &call{}
	}
	c.s, c.ch, c.req = s, ch, req
	var err error
	switch k := req.GetKind().(type) {
	case *batonpb.SessionRequest_Acquire:
		if c.cmd, err = acquireCommand(k.Acquire); err == nil {
			s.defaultLockDelay(c.cmd, k.Acquire.GetLockDelay() != nil)
		}
	case *batonpb.SessionRequest_AcquireMany:
		if c.cmd, err = acquireManyCommand(k.AcquireMany); err == nil {
			s.defaultLockDelay(c.cmd, k.AcquireMany.GetLockDelay() != nil)
		}
	case *batonpb.SessionRequest_Release:
		c.cmd, err = releaseCommand(k.Release)
	case *batonpb.SessionRequest_Proclaim:
		c.cmd, err = proclaimCommand(k.Proclaim)
	case *batonpb.SessionRequest_Cancel:
		c.cmd, err = cancelCommand(k.Cancel)
	case *batonpb.SessionRequest_Close:
		c.cmd, err = closeCommand(ch.session, k.Close.GetSeq())
		// The close's own reply, not a session_lost push, ends this channel.
		ch.closing.Store(true)
	default:
		err = invalidf("unknown or repeated session stream request")
	}
	if err == nil && c.cmd.GetSessionId() != ch.session {
		err = invalidf("request names session %d on the stream of session %d", c.cmd.GetSessionId(), ch.session)
	}
	if err == nil {
		c.arrived = time.Now()
		c.cmd.WallTimeUnixNano = c.arrived.UnixNano()
		c.cmd.SecretHash, c.cmd.Principal = ch.secret.Bytes(), ch.principal
		if c.cmd.GetAcquire() != nil || c.cmd.GetAcquireMany() != nil {
			err = s.admitGrowth(ch.ctx, c.cmd)
		}
	}
	if err != nil {
		s.answer(ch, req, nil, err, false)
		return
	}
	// The answer is queued for the channel by the Ready loop itself when
	// the entry applies (c.Complete): no goroutine per request in flight,
	// and the answers of one batch reach the stream senders together.
	if err := s.node.SubmitTo(c.cmd, c); err != nil {
		s.answer(ch, req, nil, err, false)
	}
}

// call is one mutating request of a channel: what answering it takes, in
// one allocation (closures over the request cost five per request, a
// tenth of the leader's allocations in own/64).
type call struct {
	s   *Server
	ch  *channel
	req *batonpb.SessionRequest
	cmd *fsmpb.Command // a mutating request's, once submitted
	// arrived is when the request came to this member (acquire waits).
	arrived time.Time
	// The answer of an acquire or a release, allocated with the call
	// (acquireCall, releaseCall); nil once used.
	acq *acquireAnswer
	rel *releaseAnswer
}

// acquireCall and releaseCall are a call with room for its answer, for
// the two commonest requests: one allocation where there were two.
type acquireCall struct {
	call
	ans acquireAnswer
}

type releaseCall struct {
	call
	ans releaseAnswer
}

// Complete implements raftnode.Completer for a submitted request: the
// immediate answer, sent as every answer is (hub.send). It runs on the
// Ready loop, which wakes the stream's sender at the end of its batch
// (Flush), so the answers of one batch leave together.
func (c *call) Complete(res *fsmpb.Result, _ uint64, err error) {
	if err == nil {
		err = fsm.ErrorOf(res)
		if a := c.cmd.GetAcquire(); a != nil {
			c.s.locks.acquireAnswered(a.GetLock(), waitID{c.cmd.GetSessionId(), c.cmd.GetSeq()}, c.arrived, res)
		}
	}
	var r *batonpb.SessionResponse
	// A cancel that lost the race to a grant tells the client the
	// acquire was granted, so it can release the hold.
	if err == nil || errors.Is(err, fsm.ErrNotWaiting) && res.GetAcquire() != nil {
		r = c.answer(res)
	}
	var sign *grantMode
	if err == nil && c.s.signs() && (c.cmd.GetAcquire() != nil || c.cmd.GetAcquireMany() != nil) {
		mode := modeOf(c.cmd)
		sign = &mode
	}
	c.s.answerSigned(c.ch, c.req, r, err, true, sign)
	if err == nil && c.ch.closing.Load() && c.cmd.GetCloseSession() != nil {
		c.s.hub.end(c.ch, nil)
	}
}

// answer is the response to c.req that res answers.
func (c *call) answer(res *fsmpb.Result) *batonpb.SessionResponse {
	switch k := c.req.GetKind().(type) {
	case *batonpb.SessionRequest_Acquire:
		a := c.acq
		if a == nil {
			a = &acquireAnswer{}
		}
		c.acq = nil
		fillAcquireResponse(&a.acquire, c.cmd.GetSeq(), res.GetAcquire(), lockDelayOf(c.cmd))
		a.kind.Acquire = &a.acquire
		a.resp.Kind = &a.kind
		return &a.resp
	case *batonpb.SessionRequest_Release:
		a := c.rel
		if a == nil {
			a = &releaseAnswer{}
		}
		c.rel = nil
		a.release.RemainingCount = res.GetRemainingCount()
		a.kind.Release = &a.release
		a.resp.Kind = &a.kind
		return &a.resp
	case *batonpb.SessionRequest_AcquireMany:
		out := &batonpb.AcquireManyResponse{}
		for _, o := range res.GetAcquireMany() {
			out.Results = append(out.Results, acquireToWire(c.cmd.GetSeq(), o, lockDelayOf(c.cmd)))
		}
		return &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_AcquireMany{AcquireMany: out}}
	case *batonpb.SessionRequest_Cancel:
		out := &batonpb.CancelResponse{}
		if a := res.GetAcquire(); a.GetStatus() == fsmpb.AcquireStatus_ACQUIRE_STATUS_GRANTED {
			out.Granted = acquireToWire(k.Cancel.GetAcquireSeq(), a, 0)
		}
		return &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_Cancel{Cancel: out}}
	case *batonpb.SessionRequest_Close:
		return &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_Close{Close: &batonpb.CloseSessionResponse{}}}
	case *batonpb.SessionRequest_Proclaim:
		return &batonpb.SessionResponse{Kind: &batonpb.SessionResponse_Proclaim{Proclaim: &batonpb.ProclaimResponse{}}}
	}
	return nil
}

// acquireAnswer and releaseAnswer are the answers to the two commonest
// requests, each message of them in one allocation.
type acquireAnswer struct {
	resp    batonpb.SessionResponse
	kind    batonpb.SessionResponse_Acquire
	acquire batonpb.AcquireResponse
}

type releaseAnswer struct {
	resp    batonpb.SessionResponse
	kind    batonpb.SessionResponse_Release
	release batonpb.ReleaseResponse
}
