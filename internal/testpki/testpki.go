// Package testpki makes a throwaway certificate authority for tests: a CA,
// a certificate for a member's client port (loopback names), one for
// clients and one for an operator, as PEM files and as tls.Configs, and on
// demand peer certificates that name a member.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// PKI is a CA and the certificates it signed, written under Dir.
type PKI struct {
	// PEM files: the CA's certificate, the member's certificate and key,
	// the client's certificate and key, and an operator's (a client
	// certificate with common name OperatorName).
	CAFile, CertFile, KeyFile, ClientCertFile, ClientKeyFile string
	OperatorCertFile, OperatorKeyFile                        string

	pool     *x509.CertPool
	ca       *x509.Certificate
	caKey    *ecdsa.PrivateKey
	now      time.Time
	member   tls.Certificate
	client   tls.Certificate
	operator tls.Certificate
}

// OperatorName is the common name of the operator's certificate; the
// client's is "baton client".
const OperatorName = "baton operator"

// Cert describes a certificate for Issue.
type Cert struct {
	// CommonName is the subject's common name.
	CommonName string
	// DNSNames are DNS subject alternative names; a server certificate
	// also gets "localhost".
	DNSNames []string
	// Server makes a certificate good for serving as well (ServerAuth,
	// with the loopback addresses as IP names); else it is a client's
	// only (ClientAuth).
	Server bool
}

// New makes a CA and its certificates, valid for a day, in dir.
func New(dir string) (*PKI, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "baton test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	p := &PKI{
		CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "member.pem"), KeyFile: filepath.Join(dir, "member-key.pem"),
		ClientCertFile: filepath.Join(dir, "client.pem"), ClientKeyFile: filepath.Join(dir, "client-key.pem"),
		OperatorCertFile: filepath.Join(dir, "operator.pem"), OperatorKeyFile: filepath.Join(dir, "operator-key.pem"),
		pool: x509.NewCertPool(), ca: caCert, caKey: caKey, now: now,
	}
	p.pool.AddCert(caCert)
	if err := writePEM(p.CAFile, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	for _, c := range []struct {
		spec              Cert
		certFile, keyFile string
		into              *tls.Certificate
	}{
		{Cert{CommonName: "baton member", Server: true}, p.CertFile, p.KeyFile, &p.member},
		{Cert{CommonName: "baton client"}, p.ClientCertFile, p.ClientKeyFile, &p.client},
		{Cert{CommonName: OperatorName}, p.OperatorCertFile, p.OperatorKeyFile, &p.operator},
	} {
		certPEM, keyPEM, err := p.issuePEM(c.spec)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(c.certFile, certPEM, 0o600); err != nil {
			return nil, err
		}
		if err := os.WriteFile(c.keyFile, keyPEM, 0o600); err != nil {
			return nil, err
		}
		if *c.into, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Issue signs a certificate as c describes with the CA, valid as long as
// the CA.
func (p *PKI) Issue(c Cert) (tls.Certificate, error) {
	certPEM, keyPEM, err := p.issuePEM(c)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

// issuePEM is Issue's certificate and key as PEM.
func (p *PKI) issuePEM(c Cert) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: c.CommonName},
		NotBefore: p.now.Add(-time.Hour), NotAfter: p.now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		DNSNames: c.DNSNames,
	}
	if c.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		tmpl.DNSNames = append(tmpl.DNSNames, "localhost")
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

func writePEM(path, kind string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}

// ServerConfig serves a member's client port: clients must show a
// certificate of the CA.
func (p *PKI) ServerConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{p.member}, ClientCAs: p.pool, ClientAuth: tls.RequireAndVerifyClientCert}
}

// PeerConfig is the peer transport config, both ways, of the member
// called name: its certificate names it (common name and DNS name) and
// serves on loopback.
func (p *PKI) PeerConfig(name string) (*tls.Config, error) {
	cert, err := p.Issue(Cert{CommonName: name, DNSNames: []string{name}, Server: true})
	if err != nil {
		return nil, err
	}
	return p.PeerConfigWith(cert), nil
}

// PeerConfigWith is a peer transport config, both ways, that shows cert
// and trusts the CA.
func (p *PKI) PeerConfigWith(cert tls.Certificate) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: p.pool, ClientCAs: p.pool, ClientAuth: tls.RequireAndVerifyClientCert}
}

// ClientConfig is a client's: it trusts the CA and shows the client
// certificate; withCert false leaves the certificate out.
func (p *PKI) ClientConfig(withCert bool) *tls.Config {
	c := &tls.Config{RootCAs: p.pool}
	if withCert {
		c.Certificates = []tls.Certificate{p.client}
	}
	return c
}

// OperatorConfig is an operator's client config: it trusts the CA and
// shows the certificate named OperatorName.
func (p *PKI) OperatorConfig() *tls.Config {
	return &tls.Config{RootCAs: p.pool, Certificates: []tls.Certificate{p.operator}}
}

// SelfSigned is a certificate naming name (common name and DNS name), for
// clients and servers, that no CA signed: what a stranger shows when it
// claims to be a member or a user.
func SelfSigned(name string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
