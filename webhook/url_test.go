package webhook_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/webhook"
)

func TestConfigFromURL(t *testing.T) {
	s1, s2 := newSecret(), newSecret()
	cfg, err := webhook.ConfigFromURL("webhook+https://u:p@h.example:8443/in/{topic}?secret=" + s1 + "," + s2 +
		"&timeout=3s&max_in_flight=4&max_payload=100&content_type=application/json&allow_private=true&allow_cidr=10.0.0.0/8&allow_cidr=127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32")}
	if cfg.Endpoint != "https://u:p@h.example:8443/in/%7Btopic%7D" && cfg.Endpoint != "https://u:p@h.example:8443/in/{topic}" ||
		!slices.Equal(cfg.Secrets, []string{s1, s2}) || cfg.Timeout != 3*time.Second || cfg.MaxInFlight != 4 ||
		cfg.MaxPayload != 100 || cfg.ContentType != "application/json" || !cfg.AllowPrivate || !slices.Equal(cfg.AllowCIDRs, want) {
		t.Fatalf("%+v", cfg)
	}
	if _, err := webhook.New(cfg); err != nil {
		t.Fatal(err)
	}
}

// Bad URLs fail with one line naming what is wrong, classified
// Misconfigured, never showing a secret.
func TestConfigFromURLErrors(t *testing.T) {
	const secret = "S3CRETvalue"
	for _, c := range []struct{ url, says string }{
		{"webhook+ftp://h/x", "scheme"},
		{"webhook+https://h/x?nope=1&token=" + secret, `"nope"`},
		{"webhook+https://h/x?timeout=soon", "timeout"},
		{"webhook+https://h/x?max_in_flight=0", "max_in_flight"},
		{"webhook+https://h/x?allow_cidr=10.0.0.0/99", "allow_cidr"},
		{"webhook+https://h/x?allow_private=maybe", "allow_private"},
		{"webhook+https://u:" + secret + "@h:notaport/x", "URL"},
		{"webhook+https:///x", "host"},
		{"webhook+https://h/x#frag", "fragment"},
	} {
		_, err := webhook.ConfigFromURL(c.url)
		switch {
		case err == nil:
			t.Errorf("%s: accepted", c.url)
		case !strings.Contains(err.Error(), c.says) || !publishers.IsMisconfigured(err):
			t.Errorf("%s: %v: want a Misconfigured error saying %s", c.url, err, c.says)
		case strings.Contains(err.Error(), secret):
			t.Errorf("%s: %v: shows the secret", c.url, err)
		}
	}
	// A secret that is not valid fails New, without showing it.
	cfg, err := webhook.ConfigFromURL("webhook+https://h/x?secret=whsec_" + secret)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := webhook.New(cfg); err == nil || strings.Contains(err.Error(), secret) || !publishers.IsMisconfigured(err) {
		t.Fatalf("New with a bad secret: %v", err)
	}
}
