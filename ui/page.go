package ui

import (
	"bytes"
	"net/http"
	"strings"
)

// maxQuery bounds the search box: an event ID or a key (at most 255 bytes).
const maxQuery = 255

// servePage serves the whole page, with its panels.
func (d *Dashboard) servePage(w http.ResponseWriter, r *http.Request) {
	d.render(w, r, "page")
}

// servePanels serves the panels alone: what the page's script fetches to
// update itself.
func (d *Dashboard) servePanels(w http.ResponseWriter, r *http.Request) {
	d.render(w, r, "panels")
}

func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, name string) {
	q := r.URL.Query()
	query := strings.TrimSpace(q.Get("q"))
	if len(query) > maxQuery {
		http.Error(w, "outbox ui: the search is longer than 255 bytes: an event ID or a key is not", http.StatusBadRequest)
		return
	}
	v := d.build(r.Context(), query, flash(q.Get("done"), q.Get("n"), q.Get("id")))
	var buf bytes.Buffer
	if err := d.tmpl.ExecuteTemplate(&buf, name, v); err != nil {
		d.opts.Logger.Error("ui: rendering the page failed", "error", err)
		http.Error(w, "outbox ui: rendering the page failed", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	_, _ = w.Write(buf.Bytes())
}
