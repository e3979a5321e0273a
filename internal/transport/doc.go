// Package transport carries raftpb messages between Baton members over
// TCP.
//
// Every member listens on its peer address and keeps one outbound
// connection to every other member. A connection starts with the preface
// "BATON-PEER/1\n"; then each frame is a 4-byte big-endian length and an
// Envelope (transportpb): the first carries a Hello (name, id, client and
// peer addresses), each later one a batch of marshalled raftpb.Message for
// one Raft group. The receiving member never writes on the connection.
//
// Why not gRPC, as the client API uses: on this path every goroutine
// hand-off and HTTP/2 frame is on a commit's critical path. gRPC adds a
// hand-off on each side of each message (its reader to the stream's
// handler, the sender to its writer goroutine); a plain connection has the
// sender write and the reader deliver.
//
// Sending. Send never blocks: it appends each message to the bounded queue
// of its destination (QueueSize messages) and wakes that peer's sender
// goroutine. The sender drains everything queued and writes it as one
// buffered write of Envelopes, one per group and split at
// MaxEnvelopeBytes, so messages produced while the previous batch was on
// the wire leave together (group commit on the wire). Messages to one peer
// leave in the order Send was called. When a queue is full the message is
// dropped and Handler.ReportUnreachable is called; Raft retransmits.
//
// Failure. When a connection breaks, the batch in flight and everything
// queued for that peer are dropped, ReportUnreachable is called for every
// group that ever sent to the peer, and the sender reconnects after a
// backoff growing from MinBackoff to MaxBackoff. Messages sent during the
// backoff are queued and go out on the next connection. A peer that
// vanished without closing its connection is noticed by TCP keepalives
// when idle, and by TCP_USER_TIMEOUT (Linux) or the write deadline when
// data goes unacknowledged, as in a partition: the sender then reconnects
// instead of retransmitting into the partition with ever longer backoffs.
//
// Receiving. The transport calls Handler.Receive for every message of
// every Envelope, in order, from the goroutine reading the peer's
// connection. When a peer reconnects, its older connection is closed and
// stops delivering as soon as the new one has said Hello, so per peer
// Receive is never called concurrently and never out of order (some
// messages may be lost, never reordered).
//
// Snapshots. MsgSnap travels on the same connection as everything else, in
// one frame: a snapshot must fit in MaxMessageBytes (512 MiB) once
// marshalled, and while it is being written it delays the peer's other
// messages (heartbeats included). TODO(transport): stream large snapshots
// in chunks on a connection of their own, as etcd's rafthttp does.
//
// Identity. With Config.TLS every connection is TLS both ways, and a
// member is known by its certificate (verified against the CA of the
// config): it must name the member, as its subject common name or as a
// DNS name (identity.go). An inbound connection is read past its Hello
// only if its certificate names the member the Hello claims and that
// member is one of this transport's peers (Config.Peers, then SetPeers
// from the applied membership); a member joining with cluster id 0 is
// held to the same. The one exception is an id whose removal this member
// applied: it is no longer a peer, and is only told of its removal.
// Outbound, the certificate of the member dialled must name it as well,
// whatever the server name verified (the address's host, unless set);
// nothing is written to one that does not.
// Without TLS nothing is verified and the Hello is believed: plaintext is
// for loopback and trusted networks.
package transport
