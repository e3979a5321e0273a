package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// loadPool reads PEM certificates of trusted CAs.
func loadPool(caFile string) (*x509.CertPool, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: no PEM certificate in it", caFile)
	}
	return pool, nil
}

// loadPair reads a certificate and its key; both or neither.
func loadPair(what, certFile, keyFile string) ([]tls.Certificate, error) {
	switch {
	case certFile == "" && keyFile == "":
		return nil, nil
	case certFile == "" || keyFile == "":
		return nil, usagef("%s: a certificate and its key go together (both files or neither)", what)
	}
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return []tls.Certificate{c}, nil
}

// serverTLS is the client port's TLS: nil when no file is given. With a
// CA file, clients must show a certificate it signed.
func serverTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	certs, err := loadPair("--cert-file/--key-file", certFile, keyFile)
	if err != nil {
		return nil, err
	}
	if certs == nil {
		if caFile != "" {
			return nil, usagef("--client-ca-file needs --cert-file and --key-file")
		}
		return nil, nil
	}
	cfg := &tls.Config{Certificates: certs, MinVersion: tls.VersionTLS12}
	if caFile != "" {
		if cfg.ClientCAs, err = loadPool(caFile); err != nil {
			return nil, fmt.Errorf("--client-ca-file: %w", err)
		}
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// peerTLS is the peer transport's TLS, both ways: every member shows its
// certificate and trusts only the CA's.
func peerTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	certs, err := loadPair("--peer-cert-file/--peer-key-file", certFile, keyFile)
	if err != nil {
		return nil, err
	}
	switch {
	case certs == nil && caFile == "":
		return nil, nil
	case certs == nil || caFile == "":
		return nil, usagef("peer TLS needs --peer-cert-file, --peer-key-file and --peer-ca-file together")
	}
	pool, err := loadPool(caFile)
	if err != nil {
		return nil, fmt.Errorf("--peer-ca-file: %w", err)
	}
	return &tls.Config{Certificates: certs, RootCAs: pool, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}, nil
}

// clientTLS is a client command's TLS: nil when no file is given (plain
// text). Without --cacert the system's roots are trusted.
func clientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	certs, err := loadPair("--cert/--key", certFile, keyFile)
	if err != nil {
		return nil, err
	}
	if certs == nil && caFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{Certificates: certs, MinVersion: tls.VersionTLS12}
	if caFile != "" {
		if cfg.RootCAs, err = loadPool(caFile); err != nil {
			return nil, fmt.Errorf("--cacert: %w", err)
		}
	}
	return cfg, nil
}
