package nats_test

import (
	"strings"
	"testing"
	"time"

	outboxnats "github.com/outboxgo/outbox/nats"
)

// ConfigFromURL reads every setting from the query, on any URL of a list,
// and hands nats.go the URLs without it.
func TestConfigFromURL(t *testing.T) {
	for _, c := range []struct {
		url  string
		want outboxnats.PublisherConfig
	}{
		{"nats://127.0.0.1:4222", outboxnats.PublisherConfig{URL: "nats://127.0.0.1:4222"}},
		{"nats://127.0.0.1:4222/", outboxnats.PublisherConfig{URL: "nats://127.0.0.1:4222/"}},
		{"nats://tok@h:4222?subject_prefix=app.events&stream=EVENTS&name=relay-1&max_pending=10&ack_timeout=5s&connect_timeout=1s&reconnect_wait=100ms&atomic_key_runs=true",
			outboxnats.PublisherConfig{URL: "nats://tok@h:4222", SubjectPrefix: "app.events", Stream: "EVENTS", Name: "relay-1", MaxPending: 10,
				AckTimeout: 5 * time.Second, ConnectTimeout: time.Second, ReconnectWait: 100 * time.Millisecond, AtomicKeyRuns: true}},
		{"nats://h:4222?subject_prefix=", outboxnats.PublisherConfig{URL: "nats://h:4222", SubjectPrefix: outboxnats.NoSubjectPrefix}},
		{"nats://h:4222?fast_key_runs=true", outboxnats.PublisherConfig{URL: "nats://h:4222", FastKeyRuns: true}},
		{"nats://h:4222?fast_key_runs=false", outboxnats.PublisherConfig{URL: "nats://h:4222", NoKeyRuns: true}},
		{"nats://h:4222?fast_key_runs=auto", outboxnats.PublisherConfig{URL: "nats://h:4222"}},
		{"nats://h:4222?fast_key_runs=false&atomic_key_runs=true", outboxnats.PublisherConfig{URL: "nats://h:4222", AtomicKeyRuns: true}},
		{"nats://a:1,nats://b:2?stream=X", outboxnats.PublisherConfig{URL: "nats://a:1,nats://b:2", Stream: "X"}},
		{"nats://a:1?stream=X, nats://b:2?stream=X", outboxnats.PublisherConfig{URL: "nats://a:1,nats://b:2", Stream: "X"}},
		{"nats://u:p@a:1,b:2,tls://c:3", outboxnats.PublisherConfig{URL: "nats://u:p@a:1,b:2,tls://c:3"}},
	} {
		got, err := outboxnats.ConfigFromURL(c.url)
		if err != nil {
			t.Errorf("ConfigFromURL(%q): %v", c.url, err)
			continue
		}
		if got.URL != c.want.URL || got.SubjectPrefix != c.want.SubjectPrefix || got.Stream != c.want.Stream || got.Name != c.want.Name ||
			got.MaxPending != c.want.MaxPending || got.AckTimeout != c.want.AckTimeout || got.ConnectTimeout != c.want.ConnectTimeout ||
			got.ReconnectWait != c.want.ReconnectWait || got.AtomicKeyRuns != c.want.AtomicKeyRuns || got.FastKeyRuns != c.want.FastKeyRuns || got.NoKeyRuns != c.want.NoKeyRuns ||
			len(got.Options) != 0 {
			t.Errorf("ConfigFromURL(%q) = %+v, want %+v", c.url, *got, c.want)
		}
	}
	got, err := outboxnats.ConfigFromURL("nats://h:4222?token=s3cret")
	if err != nil || got.URL != "nats://h:4222" || len(got.Options) != 1 {
		t.Errorf("token: %+v, %v; want the URL without it and one option", got, err)
	}
}

// A bad URL is one error that says what is wrong, names the URL with its
// secrets hidden and never shows a password or token.
func TestConfigFromURLRefuses(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"nats://alice:s3cret@h:4222?bogus=1", `unknown parameter "bogus" (known: subject_prefix, stream,`},
		{"nats://h:4222?token=s3cret&Stream=X", `unknown parameter "Stream"`},
		{"nats://s3cret@h:4222?ack_timeout=soon", "ack_timeout: "},
		{"nats://h:4222?ack_timeout=-1s", "ack_timeout: -1s is negative"},
		{"nats://h:4222?connect_timeout=x", "connect_timeout: "},
		{"nats://h:4222?reconnect_wait=-2s", "reconnect_wait: -2s is negative"},
		{"nats://h:4222?max_pending=-1", "max_pending: -1 is negative"},
		{"nats://h:4222?max_pending=many", "max_pending: "},
		{"nats://h:4222?atomic_key_runs=maybe", "atomic_key_runs: "},
		{"nats://h:4222?fast_key_runs=maybe", `fast_key_runs: "maybe": want auto, true or false`},
		{"nats://h:4222?fast_key_runs=true&atomic_key_runs=true", "AtomicKeyRuns and FastKeyRuns are both set"},
		{"nats://h:4222?subject_prefix=a%20b", `subject_prefix: "a b": want dot-separated tokens`},
		{"nats://h:4222?subject_prefix=a.*", "subject_prefix: "},
		{"nats://h:4222?stream=A.B", "stream: "},
		{"nats://h:4222?stream=EVENTS&subject_prefix=", "subject_prefix is empty, so the stream would capture every subject (>)"},
		{"nats://h:4222?token=", "token: empty"},
		{"nats://a:1?stream=X,nats://b:2?stream=Y", `parameter "stream" given twice: "X" and "Y"`},
		{"nats://a:1?token=s3cret,nats://b:2?token=s3cretTOO", `parameter "token" given twice, with different values`},
		{"http://alice:s3cret@h:4222", `scheme "http"`},
		{"nats://alice:s3cret@h:4222/path", "no path"},
		{"nats://h:4222,,nats://h2:4222", "an empty URL in the list"},
		{"nats://", "no host"},
	} {
		_, err := outboxnats.ConfigFromURL(c.url)
		if err == nil {
			t.Errorf("ConfigFromURL(%q) succeeded", c.url)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, c.want) || !strings.HasPrefix(msg, "nats publisher: URL nats://") && !strings.HasPrefix(msg, "nats publisher: URL http://") {
			t.Errorf("ConfigFromURL(%q) = %q, want it to name the URL and say %q", c.url, msg, c.want)
		}
		if strings.Contains(msg, "s3cret") || strings.Contains(msg, "\n") {
			t.Errorf("ConfigFromURL(%q) = %q: shows a secret, or is more than a line", c.url, msg)
		}
	}
}

// Whatever the URL around them, a password and a token never show in the
// error.
func FuzzConfigFromURL(f *testing.F) {
	for _, s := range [][2]string{{"h:4222", "stream=X"}, {"h:4222,nats://h2", "bogus=1"}, {"h", "ack_timeout=x&token=T"}, {"[::1]:4222", "subject_prefix=%zz"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, host, query string) {
		if strings.Contains(strings.ToLower(host+query), "s3cret") {
			return
		}
		for _, raw := range []string{"nats://alice:S3CRETpw@" + host + "?" + query, "nats://S3CRETtok@" + host + "?" + query,
			"nats://" + host + "?token=S3CRETtok&" + query} {
			if _, err := outboxnats.ConfigFromURL(raw); err != nil && strings.Contains(strings.ToLower(err.Error()), "s3cret") {
				t.Fatalf("ConfigFromURL(%q) = %q: shows the secret", raw, err)
			}
		}
	})
}
