package nats

import "testing"

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"nats://127.0.0.1:4222":                  "nats://127.0.0.1:4222",
		"nats://alice:s3cret@h:4222":             "nats://alice:xxxxx@h:4222",
		"nats://t0ken@h:4222":                    "nats://xxxxx@h:4222",
		"nats://a:p@h1:4222, nats://b:q@h2:4222": "nats://a:xxxxx@h1:4222,nats://b:xxxxx@h2:4222",
		"nats://a:p%zz@h:4222":                   "xxxxx@h:4222",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}
