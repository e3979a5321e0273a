// Package transport carries raftpb messages between Baton members over gRPC.
//
// Every member serves the Peer service (transportpb) on its peer address and
// keeps one outbound client stream to every other member. The first
// Envelope on a stream is a Hello (name, id, client and peer addresses);
// each later Envelope carries a batch of marshalled raftpb.Message for one
// Raft group.
//
// Sending. Send never blocks: it appends each message to the bounded queue
// of its destination (QueueSize messages) and wakes that peer's sender
// goroutine. The sender drains everything queued and writes it as one
// Envelope per group (split at MaxEnvelopeBytes), so messages produced while
// the previous batch was on the wire leave together (group commit on the
// wire). Messages to one peer leave in the order Send was called. When a
// queue is full the message is dropped and Handler.ReportUnreachable is
// called; Raft retransmits.
//
// Failure. When a stream breaks, the batch in flight and everything queued
// for that peer are dropped, ReportUnreachable is called for every group
// that ever sent to the peer, and the sender reconnects after a backoff
// growing from MinBackoff to MaxBackoff. Messages sent during the backoff
// are queued and go out on the next stream. gRPC keepalives detect a peer
// that vanished without closing its connection.
//
// Receiving. The server side calls Handler.Receive for every message of
// every Envelope, in order, from the goroutine of the peer's stream. When a
// peer reconnects, its older stream stops delivering as soon as the new one
// has said Hello, so per peer Receive is never called concurrently and
// never out of order (some messages may be lost, never reordered).
//
// Snapshots. MsgSnap travels on the same stream as everything else, as one
// gRPC message: a snapshot must fit in MaxMessageBytes (512 MiB) once
// marshalled, and while it is being written it delays the peer's other
// messages (heartbeats included). TODO(transport): stream large snapshots
// in chunks on a separate RPC, as etcd's rafthttp does.
//
// There is no authentication or TLS yet: peers are trusted.
package transport
