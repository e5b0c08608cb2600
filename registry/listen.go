package registry

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
)

// ServerTLS is the TLS configuration of a registry served on HTTPS with
// the certificate of certFile (PEM, the chain after it) and the key of
// keyFile: TLS 1.2 or later, HTTP/1.1 (a watch is a long response, which
// HTTP/2's flow control would only complicate).
func ServerTLS(certFile, keyFile string) (*tls.Config, error) {
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("registry: a TLS certificate and its key go together")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("registry TLS certificate %s, key %s: %w", certFile, keyFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}, nil
}

// Listen listens on addr for a registry's API, on HTTPS when certFile and
// keyFile are given (see ServerTLS), and returns the listener and the URL
// that reaches it from this host: http:// or https://, with a loopback
// address for a listener on every address (0.0.0.0 is not a host a
// certificate names). Both `flyd registry serve` and the daemon's embedded
// registry listen with it.
func Listen(addr, certFile, keyFile string) (net.Listener, string, error) {
	var tc *tls.Config
	if certFile != "" || keyFile != "" {
		var err error
		if tc, err = ServerTLS(certFile, keyFile); err != nil {
			return nil, "", err
		}
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	scheme := "http"
	if tc != nil {
		l, scheme = tls.NewListener(l, tc), "https"
	}
	return l, scheme + "://" + reachable(l.Addr()), nil
}

// reachable is addr with an unspecified IP replaced by 127.0.0.1: Go
// listens on every address, 0.0.0.0 or [::], with one socket that takes
// IPv4 too.
func reachable(addr net.Addr) string {
	ta, ok := addr.(*net.TCPAddr)
	if !ok || !ta.IP.IsUnspecified() {
		return addr.String()
	}
	return (&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: ta.Port}).String()
}

// VerifyServed checks that a client trusting roots (nil: the system's
// CAs) accepts the certificate of certFile for host, as it will when it
// connects: a registry whose own registrar would refuse it is better
// refused when it starts than failing every heartbeat after.
func VerifyServed(certFile, keyFile string, roots *x509.CertPool, host string) error {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return fmt.Errorf("registry TLS certificate %s, key %s: %w", certFile, keyFile, err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return fmt.Errorf("registry TLS certificate %s: %w", certFile, err)
		}
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return fmt.Errorf("registry TLS certificate %s: %w", certFile, err)
		}
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: host}); err != nil {
		return fmt.Errorf("registry TLS certificate %s is not trusted for %s by the CAs the registrar trusts: %w", certFile, host, err)
	}
	return nil
}
