package kafka_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxgo/outbox/kafka"
)

// TestTLS: the publisher dials the brokers with the TLS of its
// ClientOptions, through the write gate, and a key run arrives in order.
// Without the TLS option it cannot publish there.
func TestTLS(t *testing.T) {
	server, client := tlsConfigs(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(1), kfake.TLS(server))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	b := c.ListenAddrs()
	prefix := newTopicName(t) + "."
	withTLS := kgo.DialTLSConfig(client)
	createTopic(t, b, prefix+testTopic, withTLS)

	p := newPublisher(t, &kafka.PublisherConfig{Brokers: b, TopicPrefix: prefix, ClientOptions: []kgo.Opt{withTLS}})
	defer p.Close()
	msgs := keyed("k", 3)
	mustPublish(t, p, msgs)
	if got, want := ids(read(t, b, prefix+testTopic, prefix, len(msgs), 15*time.Second, withTLS)), idsOf(msgs); !slices.Equal(got, want) {
		t.Errorf("stored %v, want %v", got, want)
	}

	plain := newPublisher(t, &kafka.PublisherConfig{Brokers: b, TopicPrefix: prefix, DeliveryTimeout: 2 * time.Second})
	defer plain.Close()
	if err := publish(t, plain, keyed("k", 1))[0]; err == nil {
		t.Error("a publisher without TLS stored a message on a TLS listener")
	}
}

// tlsConfigs returns a server configuration with a self-signed
// certificate for 127.0.0.1 and a client configuration that trusts it.
func tlsConfigs(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "outbox test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	server = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
	client = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return server, client
}
