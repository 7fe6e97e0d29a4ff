package outboxcli

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/outboxgo/outbox/stores"
)

func newDeadShow(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show one dead event: every field, its headers, payload and last error",
		Long: `dead show prints every field of one dead event: ID, topic, key, type,
creation and not-before times, attempts, last error, headers and payload.

The payload is printed as it is when it is JSON (valid UTF-8, nothing but
printable characters, spaces, tabs and newlines), else in base64, and says
which. Other fields are shown escaped like 'outbox dead list' shows them.

--json prints {"id", "topic", "key", "type", "headers", "created_at",
"not_before" (when set), "attempts", "last_error", "payload_encoding":
"json" or "base64", "payload": the JSON value itself, or the base64
string}.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			c := g.checks(cmd)
			d, err := g.openChecked(cmd, c)
			if err != nil {
				return err
			}
			defer d.close()
			ctx := cmd.Context()
			recs, err := d.store.Dead(ctx, stores.DeadParams{IDs: ids, Limit: 1})
			if err != nil {
				return schemaMissing(err, d)
			}
			if len(recs) == 0 {
				return fmt.Errorf("no dead event %s in %s (it is pending, published or not there)", ids[0], d.table)
			}
			r := recs[0]
			enc, payload := payloadText(r.Payload)
			if asJSON {
				return g.printJSON(showJSON{deadJSON: deadJSONOf(r), NotBefore: utcOrNil(r.NotBefore),
					PayloadEncoding: enc, Payload: payloadJSON(enc, payload)})
			}
			w := tabwriter.NewWriter(g.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintf(w, "ID:\t%s\n", r.ID)
			fmt.Fprintf(w, "Topic:\t%s\n", display(r.Topic))
			fmt.Fprintf(w, "Key:\t%s\n", display(r.Key))
			fmt.Fprintf(w, "Type:\t%s\n", display(r.Type))
			fmt.Fprintf(w, "Created:\t%s\n", r.CreatedAt.UTC().Format(time.RFC3339Nano))
			if !r.NotBefore.IsZero() {
				fmt.Fprintf(w, "Not before:\t%s\n", r.NotBefore.UTC().Format(time.RFC3339Nano))
			}
			fmt.Fprintf(w, "Attempts:\t%d\n", r.Attempts)
			fmt.Fprintf(w, "Last error:\t%s\n", display(r.LastError))
			fmt.Fprintf(w, "Headers:\t%d\n", len(r.Headers))
			keys := make([]string, 0, len(r.Headers))
			for k := range r.Headers {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				fmt.Fprintf(w, "  %s:\t%s\n", display(k), display(r.Headers[k]))
			}
			fmt.Fprintf(w, "Payload:\t%d bytes, %s\n", len(r.Payload), enc)
			if err := w.Flush(); err != nil {
				return err
			}
			_, err = fmt.Fprintln(g.stdout, payload)
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of text (exact strings)")
	return cmd
}

// showJSON is the --json of dead show.
type showJSON struct {
	deadJSON
	NotBefore       *time.Time      `json:"not_before,omitempty"`
	PayloadEncoding string          `json:"payload_encoding"`
	Payload         json.RawMessage `json:"payload"`
}

func utcOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// payloadText returns how a payload is safe to print, "json" or "base64",
// and its text: JSON as it is when it is valid UTF-8 JSON of printable
// characters, spaces, tabs and newlines (so no terminal escape, carriage
// return or bidirectional override), else base64.
func payloadText(b []byte) (encoding, text string) {
	if len(b) > 0 && utf8.Valid(b) && json.Valid(b) && printable(string(b)) {
		return "json", string(b)
	}
	return "base64", base64.StdEncoding.EncodeToString(b)
}

func printable(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool {
		return !unicode.IsPrint(r) && r != '\n' && r != '\t'
	})
}

// payloadJSON is the payload as it goes into --json: the JSON value, or
// the base64 text as a JSON string.
func payloadJSON(encoding, text string) json.RawMessage {
	if encoding == "json" {
		return json.RawMessage(text)
	}
	b, _ := json.Marshal(text) // a base64 string always marshals
	return b
}
