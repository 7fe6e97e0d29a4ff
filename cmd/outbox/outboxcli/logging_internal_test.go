package outboxcli

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// An error value with newlines (errors.Join) is logged on one line, in
// both formats, and any secret in a record is hidden.
func TestLoggerOneLineRedacted(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		var buf bytes.Buffer
		g := &globals{logFormat: format, logLevel: "info", stderr: &buf}
		log, err := g.newLogger()
		if err != nil {
			t.Fatal(err)
		}
		joined := errors.Join(errors.New("publish 1: nats: timeout"), errors.New("dial nats://s3cretTOKEN@h:4222:\nrefused"))
		log.With("url", "postgres://bob:s3cret@db/app").Error("batch failed\nwith two lines", "error", joined, "n", 2,
			"group", map[string]string{"k": "v"})
		out := buf.String()
		if strings.Count(out, "\n") != 1 || strings.Contains(out, "s3cret") {
			t.Fatalf("%s: %q", format, out)
		}
		if format == "json" {
			var rec map[string]any
			if err := json.Unmarshal([]byte(out), &rec); err != nil {
				t.Fatal(err)
			}
			if rec["error"] != "publish 1: nats: timeout\ndial nats://xxxxx@h:4222:\nrefused" || rec["url"] != "postgres://bob:xxxxx@db/app" {
				t.Fatalf("json: %v", rec)
			}
		}
	}
}
