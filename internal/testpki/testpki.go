// Package testpki makes a throwaway certificate authority for tests: a CA,
// a certificate for members (loopback names, good for serving and for
// dialing peers) and one for clients, as PEM files and as tls.Configs.
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
	member   tls.Certificate
	client   tls.Certificate
	operator tls.Certificate
}

// OperatorName is the common name of the operator's certificate; the
// client's is "baton client".
const OperatorName = "baton operator"

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
		pool: x509.NewCertPool(),
	}
	p.pool.AddCert(caCert)
	if err := writePEM(p.CAFile, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	issue := func(serial int64, cn string, usage []x509.ExtKeyUsage, loopback bool, certFile, keyFile string) (tls.Certificate, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return tls.Certificate{}, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage,
		}
		if loopback {
			tmpl.DNSNames = []string{"localhost"}
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return tls.Certificate{}, err
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return tls.Certificate{}, err
		}
		if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
			return tls.Certificate{}, err
		}
		if err := writePEM(keyFile, "EC PRIVATE KEY", kder); err != nil {
			return tls.Certificate{}, err
		}
		return tls.LoadX509KeyPair(certFile, keyFile)
	}
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	if p.member, err = issue(2, "baton member", both, true, p.CertFile, p.KeyFile); err != nil {
		return nil, err
	}
	if p.client, err = issue(3, "baton client", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, false, p.ClientCertFile, p.ClientKeyFile); err != nil {
		return nil, err
	}
	if p.operator, err = issue(4, OperatorName, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, false, p.OperatorCertFile, p.OperatorKeyFile); err != nil {
		return nil, err
	}
	return p, nil
}

func writePEM(path, kind string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}

// ServerConfig serves a member's client port: clients must show a
// certificate of the CA.
func (p *PKI) ServerConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{p.member}, ClientCAs: p.pool, ClientAuth: tls.RequireAndVerifyClientCert}
}

// PeerConfig is a member's peer transport config, both ways.
func (p *PKI) PeerConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{p.member}, RootCAs: p.pool, ClientCAs: p.pool, ClientAuth: tls.RequireAndVerifyClientCert}
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
