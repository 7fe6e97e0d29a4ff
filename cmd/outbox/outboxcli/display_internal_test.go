package outboxcli

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/outboxgo/outbox/internal/hostile"
)

func TestDisplay(t *testing.T) {
	for _, s := range append(hostile.Strings, "plain", "žluťoučký kůň", "a b", `"quoted"`, "bad\xffutf8", "") {
		got := display(s)
		for _, r := range got {
			if !unicode.IsPrint(r) {
				t.Errorf("display(%q) = %q holds %U", s, got, r)
			}
		}
		if got != s {
			back, err := strconv.Unquote(got)
			if err != nil || back != s {
				t.Errorf("display(%q) = %q does not unquote to it: %q, %v", s, got, back, err)
			}
		}
	}
	for _, s := range []string{"plain", "žluťoučký kůň ☃", "emoji 🙂", "a b", "colon: value", ""} {
		if display(s) != s {
			t.Errorf("display(%q) = %q, want it as is", s, display(s))
		}
	}
}

// --help goes through the redactor: a default that holds a secret is not
// printed.
func TestHelpRedacted(t *testing.T) {
	var out, errb bytes.Buffer
	root := newRoot(&out, &errb)
	root.PersistentFlags().Lookup("database-url").DefValue = "postgres://bob:s3cret@db/app?sslpassword=s3cret"
	root.SetArgs([]string{"status", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "s3cret") || !strings.Contains(out.String(), "postgres://bob:xxxxx@db/app?sslpassword=xxxxx") {
		t.Fatalf("help:\n%s", out.String())
	}
}
