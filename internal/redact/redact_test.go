package redact

import (
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://bob:s3cret@db:5432/app?sslmode=disable", "postgres://bob:xxxxx@db:5432/app?sslmode=disable"},
		{"postgres://bob@db/app", "postgres://bob@db/app"},
		{"postgres://db/app?password=s3cret&sslmode=require", "postgres://db/app?password=xxxxx&sslmode=require"},
		{"nats://a:s3cret@n1:4222,nats://b:s3cret@n2:4222", "nats://a:xxxxx@n1:4222,nats://b:xxxxx@n2:4222"},
		{"host=db user=bob password=s3cret dbname=app", "host=db user=bob password=xxxxx dbname=app"},
		{"host=db password='s3 cret' dbname=app", "host=db password=xxxxx dbname=app"},
		{"postgres://bob:s3c%zzret@db/app", "postgres://xxxxx@db/app"},
	} {
		got := URL(c.in)
		if got != c.want {
			t.Errorf("URL(%q) = %q, want %q", c.in, got, c.want)
		}
		if strings.Contains(got, "s3c") {
			t.Errorf("URL(%q) leaks the password: %q", c.in, got)
		}
	}
}

func FuzzURL(f *testing.F) {
	f.Add("postgres://bob:s3cret@db:5432/app")
	f.Add("nats://a:pw@h1,nats://b:pw@h2")
	f.Add("host=x password=pw")
	f.Fuzz(func(t *testing.T, pw string) {
		if len(pw) < 4 || strings.ContainsAny(pw, "@/?#,:% \t\n'\\") {
			return
		}
		for _, s := range []string{
			"postgres://bob:" + pw + "@db/app",
			"nats://a:" + pw + "@h1,nats://b:" + pw + "@h2",
			"host=db password=" + pw + " dbname=x",
		} {
			if got := URL(s); strings.Contains(got, pw) {
				t.Fatalf("URL(%q) = %q leaks the password", s, got)
			}
		}
	})
}

func TestText(t *testing.T) {
	in := "cannot parse `postgres://bob:s3cret@db/app`: failed, also host=x password=s3cret, nats://a:s3cret@h"
	got := Text(in)
	if strings.Contains(got, "s3cret") {
		t.Fatalf("Text leaks: %q", got)
	}
	if !strings.Contains(got, "postgres://bob:xxxxx@db/app") {
		t.Fatalf("Text mangled the URL: %q", got)
	}
}
