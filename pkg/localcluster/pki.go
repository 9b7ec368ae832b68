package localcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds the paths of the cluster's throw-away certificates and keys, all under
// StateDir/pki. Everything is generated here with crypto/x509; nothing leaves the
// state directory.
type pki struct {
	dir string
	// hostIPs are more addresses of the API server's and the shared serving
	// certificates: with container nodes, the host IP that their pods reach
	// the API server and the manager's status server on.
	hostIPs []net.IP
}

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }

// CA, API server serving pair, admin client pair, service-account key pair, and a
// serving pair for 127.0.0.1 shared by the webhook servers, the secure ports of
// kube-controller-manager and kube-scheduler, the process nodes' kubelet API and
// the manager's status server.
func (p pki) caCert() string        { return p.path("ca.crt") }
func (p pki) caKey() string         { return p.path("ca.key") }
func (p pki) apiserverCert() string { return p.path("apiserver.crt") }
func (p pki) apiserverKey() string  { return p.path("apiserver.key") }
func (p pki) adminCert() string     { return p.path("admin.crt") }
func (p pki) adminKey() string      { return p.path("admin.key") }
func (p pki) saKey() string         { return p.path("sa.key") }
func (p pki) saPub() string         { return p.path("sa.pub") }

// The API server's client certificate for kubelet APIs (the process nodes' container logs).
func (p pki) kubeletClientCert() string { return p.path("apiserver-kubelet-client.crt") }
func (p pki) kubeletClientKey() string  { return p.path("apiserver-kubelet-client.key") }

// servingDir holds tls.crt/tls.key, the layout controller-runtime webhook servers expect.
func (p pki) servingDir() string  { return p.path("serving") }
func (p pki) servingCert() string { return filepath.Join(p.servingDir(), "tls.crt") }
func (p pki) servingKey() string  { return filepath.Join(p.servingDir(), "tls.key") }

// generate writes a fresh PKI. RSA keys where the consumers insist on RSA (the
// CA, whose key kube-controller-manager uses as cluster signer, and the
// service-account key), ECDSA P-256 elsewhere because it is much faster to make.
func (p pki) generate() error {
	if err := os.MkdirAll(p.servingDir(), 0o700); err != nil {
		return err
	}
	now := time.Now().Add(-time.Hour) // tolerate small clock differences
	notAfter := now.Add(365 * 24 * time.Hour)

	caKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "trainyard-local-cluster-ca"},
		NotBefore:             now,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	if err := writeCert(p.caCert(), caDER); err != nil {
		return err
	}
	if err := writeKey(p.caKey(), caKey); err != nil {
		return err
	}

	leaf := func(certPath, keyPath string, subj pkix.Name, usage x509.ExtKeyUsage, dns []string, ips []net.IP) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(),
			Subject:      subj,
			NotBefore:    now,
			NotAfter:     notAfter,
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			DNSNames:     dns,
			IPAddresses:  ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		if err := writeCert(certPath, der); err != nil {
			return err
		}
		return writeKey(keyPath, key)
	}
	loopback := []net.IP{net.IPv4(127, 0, 0, 1)}
	if err := leaf(p.apiserverCert(), p.apiserverKey(), pkix.Name{CommonName: "kube-apiserver"}, x509.ExtKeyUsageServerAuth,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		append(append(loopback, net.IPv4(10, 0, 0, 1)), p.hostIPs...)); err != nil {
		return fmt.Errorf("apiserver certificate: %w", err)
	}
	if err := leaf(p.adminCert(), p.adminKey(), pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
		x509.ExtKeyUsageClientAuth, nil, nil); err != nil {
		return fmt.Errorf("admin certificate: %w", err)
	}
	if err := leaf(p.kubeletClientCert(), p.kubeletClientKey(), pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		x509.ExtKeyUsageClientAuth, nil, nil); err != nil {
		return fmt.Errorf("kubelet client certificate: %w", err)
	}
	if err := leaf(p.servingCert(), p.servingKey(), pkix.Name{CommonName: "127.0.0.1"}, x509.ExtKeyUsageServerAuth,
		[]string{"localhost"}, append(append(loopback, net.ParseIP(ProcessHostAddress)), p.hostIPs...)); err != nil {
		return fmt.Errorf("serving certificate: %w", err)
	}

	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	if err := writeKey(p.saKey(), saKey); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	return os.WriteFile(p.saPub(), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(err)
	}
	return n
}

func writeCert(path string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
}

func writeKey(path string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}
