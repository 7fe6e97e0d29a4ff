package outboxcli

import "encoding/json"

// printJSON writes v to stdout as indented JSON, exact strings (no HTML
// escaping): what every --json prints.
func (g *globals) printJSON(v any) error {
	enc := json.NewEncoder(g.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
