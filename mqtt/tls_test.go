package mqtt_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/mqtt"
	"github.com/outboxgo/outbox/publishers"
)

// writeCerts writes a CA and a server certificate for 127.0.0.1 signed by
// it into dir: ca.pem, server.pem, server.key.
func writeCerts(t *testing.T, dir string) {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, srvKey := key(), key()
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "outbox test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	pemOf := func(typ string, der []byte) string {
		return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	writeFile(t, filepath.Join(dir, "ca.pem"), pemOf("CERTIFICATE", caDER))
	writeFile(t, filepath.Join(dir, "server.pem"), pemOf("CERTIFICATE", srvDER))
	writeFile(t, filepath.Join(dir, "server.key"), pemOf("EC PRIVATE KEY", keyDER))
}

// mqtts:// with ca_file publishes over TLS; without it the broker's
// certificate is not trusted: misconfigured, not an outage.
func TestTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeCerts(t, dir)
	b := startPrivateBroker(t, "cafile "+filepath.Join(dir, "ca.pem"), "certfile "+filepath.Join(dir, "server.pem"),
		"keyfile "+filepath.Join(dir, "server.key"))
	tlsURL := strings.Replace(b.url(userAdmin, ""), "mqtt://", "mqtts://", 1)

	cfg, err := mqtt.ConfigFromURL(tlsURL + "?topic_prefix=tls/&ca_file=" + filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	p := newPublisher(t, *cfg)
	defer p.Close()
	if err := p.Check(ctxT(t)); err != nil {
		t.Fatalf("Check over TLS: %v", err)
	}
	if errs := p.Publish(ctxT(t), []outbox.Message{msg("t", "k", []byte("over TLS"))}); errs[0] != nil {
		t.Fatalf("Publish over TLS: %v", errs[0])
	}

	cfg, err = mqtt.ConfigFromURL(tlsURL)
	if err != nil {
		t.Fatal(err)
	}
	untrusting := newPublisher(t, *cfg)
	defer untrusting.Close()
	err = untrusting.Check(ctxT(t))
	t.Logf("Check without the CA: %v", err)
	if !publishers.IsMisconfigured(err) || publishers.IsUnavailable(err) {
		t.Errorf("Check without the CA: %v, want Misconfigured", err)
	}
	if strings.Contains(err.Error(), userAdmin+"-pw") {
		t.Errorf("the error shows the password: %v", err)
	}
}
