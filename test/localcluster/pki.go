package localcluster

import (
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

// pki holds the file paths of the certificates and keys a local cluster needs.
type pki struct {
	CACert, CAKey           string
	ServingCert, ServingKey string
	AdminCert, AdminKey     string
	SAKey, SAPub            string
	// A real node's credentials: the API server's client certificate for kubelets, the
	// kubelet's (system:node:<name>, Node authorizer) and kube-proxy's (system:kube-proxy).
	KubeletClientCert, KubeletClientKey string
	NodeCert, NodeKey                   string
	ProxyCert, ProxyKey                 string
	// RegistryCert serves the real node's image registry over HTTPS (127.0.0.1, node IP).
	RegistryCert, RegistryKey string
	// The aggregation layer: the API server proxies to extension API servers (OLM's
	// packageserver) with the front-proxy client certificate, signed by its own CA.
	FrontProxyCACert, FrontProxyClientCert, FrontProxyClientKey string
}

// writePKI creates a CA, a serving certificate for the API server, an admin client
// certificate (system:masters) and a service-account signing key pair under dir.
func writePKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{
		CACert: filepath.Join(dir, "ca.crt"), CAKey: filepath.Join(dir, "ca.key"),
		ServingCert: filepath.Join(dir, "apiserver.crt"), ServingKey: filepath.Join(dir, "apiserver.key"),
		AdminCert: filepath.Join(dir, "admin.crt"), AdminKey: filepath.Join(dir, "admin.key"),
		SAKey: filepath.Join(dir, "sa.key"), SAPub: filepath.Join(dir, "sa.pub"),
		KubeletClientCert: filepath.Join(dir, "apiserver-kubelet-client.crt"), KubeletClientKey: filepath.Join(dir, "apiserver-kubelet-client.key"),
		NodeCert: filepath.Join(dir, "node.crt"), NodeKey: filepath.Join(dir, "node.key"),
		ProxyCert: filepath.Join(dir, "kube-proxy.crt"), ProxyKey: filepath.Join(dir, "kube-proxy.key"),
		RegistryCert: filepath.Join(dir, "registry.crt"), RegistryKey: filepath.Join(dir, "registry.key"),
		FrontProxyCACert:     filepath.Join(dir, "front-proxy-ca.crt"),
		FrontProxyClientCert: filepath.Join(dir, "front-proxy-client.crt"), FrontProxyClientKey: filepath.Join(dir, "front-proxy-client.key"),
	}
	now := time.Now().Add(-time.Hour)
	caCert, caKey, err := newCA(p.CACert, p.CAKey, "quartet-local-ca", now)
	if err != nil {
		return nil, err
	}
	fpCert, fpKey, err := newCA(p.FrontProxyCACert, filepath.Join(dir, "front-proxy-ca.key"), "quartet-front-proxy-ca", now)
	if err != nil {
		return nil, err
	}

	leafOf := func(caCert *x509.Certificate, caKey *ecdsa.PrivateKey, certPath, keyPath string, serial int64, tmpl *x509.Certificate) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore = now
		tmpl.NotAfter = now.Add(10 * 365 * 24 * time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		if err := writeCert(certPath, der); err != nil {
			return err
		}
		return writeECKey(keyPath, key)
	}
	leaf := func(certPath, keyPath string, serial int64, tmpl *x509.Certificate) error {
		return leafOf(caCert, caKey, certPath, keyPath, serial, tmpl)
	}
	if err := leafOf(fpCert, fpKey, p.FrontProxyClientCert, p.FrontProxyClientKey, 2, &x509.Certificate{
		Subject: pkix.Name{CommonName: "front-proxy-client"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return nil, fmt.Errorf("front-proxy client certificate: %w", err)
	}
	if err := leaf(p.ServingCert, p.ServingKey, 2, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1"), net.ParseIP(RealNodeIP)},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
	}); err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	if err := leaf(p.AdminCert, p.AdminKey, 3, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return nil, fmt.Errorf("admin certificate: %w", err)
	}
	if err := leaf(p.RegistryCert, p.RegistryKey, 7, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "quartet-image-registry"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(RealNodeIP)},
		DNSNames:    []string{"localhost"},
	}); err != nil {
		return nil, fmt.Errorf("registry certificate: %w", err)
	}
	for i, cl := range []struct {
		cert, key string
		subject   pkix.Name
	}{
		{p.KubeletClientCert, p.KubeletClientKey, pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}}},
		{p.NodeCert, p.NodeKey, pkix.Name{CommonName: "system:node:" + RealNodeName, Organization: []string{"system:nodes"}}},
		{p.ProxyCert, p.ProxyKey, pkix.Name{CommonName: "system:kube-proxy"}},
	} {
		if err := leaf(cl.cert, cl.key, int64(4+i), &x509.Certificate{
			Subject: cl.subject, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}); err != nil {
			return nil, fmt.Errorf("%s certificate: %w", cl.subject.CommonName, err)
		}
	}

	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.SAKey, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY",
		Bytes: x509.MarshalPKCS1PrivateKey(saKey)}), 0o600); err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.SAPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o600); err != nil {
		return nil, err
	}
	return p, nil
}

// newCA writes a self-signed CA certificate and its key.
func newCA(certPath, keyPath, cn string, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now,
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	if err := writeCert(certPath, der); err != nil {
		return nil, nil, err
	}
	return cert, key, writeECKey(keyPath, key)
}

func writeCert(path string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
}

func writeECKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
}
