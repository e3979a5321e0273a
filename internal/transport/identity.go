package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"slices"
)

// With TLS a member is known by its certificate: the certificate a peer
// shows, verified against the peer CA, must name the member the peer
// speaks for, as its subject common name or as a DNS subject alternative
// name, exactly (names are case-sensitive, as member names are). Inbound,
// the member is the one the Hello claims; outbound, the one dialled. The
// name to look for is the member's as this transport knows it (Peers,
// SetPeers): the applied membership, or the initial cluster before one is
// applied. Without TLS there is nothing to check and the Hello is
// believed.

// errNotNamed ends an inbound connection whose certificate does not name
// the member its Hello claims, or whose Hello claims an id that is not a
// member here.
var errNotNamed = errors.New("the peer's certificate does not name a member it may speak for")

// errWrongPeer ends an outbound connection to a member whose certificate
// does not name that member.
var errWrongPeer = errors.New("the peer's certificate does not name the member dialled")

// certNames returns the names the verified certificate of a TLS
// connection gives its holder: the subject common name, then the DNS
// subject alternative names. It is nil when the handshake verified no
// certificate (none shown, or a config that does not verify).
func certNames(cs tls.ConnectionState) []string {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return nil
	}
	return leafNames(cs.VerifiedChains[0][0])
}

// leafNames returns the subject common name and the DNS subject
// alternative names of leaf.
func leafNames(leaf *x509.Certificate) []string {
	names := make([]string, 0, 1+len(leaf.DNSNames))
	if cn := leaf.Subject.CommonName; cn != "" {
		names = append(names, cn)
	}
	return append(names, leaf.DNSNames...)
}

// ownNames returns the names cert (this member's own) gives its holder,
// as certNames does for a peer's verified one.
func ownNames(cert tls.Certificate) ([]string, error) {
	leaf := cert.Leaf
	if leaf == nil {
		if len(cert.Certificate) == 0 {
			return nil, errors.New("no certificate in it")
		}
		var err error
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, err
		}
	}
	return leafNames(leaf), nil
}

// namesMember reports whether names (a certificate's) name the member
// called name.
func namesMember(names []string, name string) bool {
	return name != "" && slices.Contains(names, name)
}

// peerName is the name of member id as this transport knows it; ok is
// false for an id that is not one of its peers.
func (t *Transport) peerName(id uint64) (name string, ok bool) {
	p := (*t.peers.Load())[id]
	if p == nil {
		return "", false
	}
	return p.name, true
}

// checkClaim lets an inbound connection whose Hello claims to be member
// from go on only if names, its verified certificate's, name that member.
// A refusal is logged (one Warn line) and returned.
func (t *Transport) checkClaim(c net.Conn, from uint64, names []string) error {
	name, ok := t.peerName(from)
	if ok && namesMember(names, name) {
		return nil
	}
	why := "refused a peer connection: its certificate does not name the member it claims to be"
	if !ok {
		why = "refused a peer connection: it claims to be a member this one does not know"
	}
	t.log.Warn(why, "remote", c.RemoteAddr().String(), "peer", from, "claimed_name", name, "cert_names", names)
	return errNotNamed
}
