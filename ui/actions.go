package ui

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/stores"
)

// serveRetry makes the dead event of the form's id pending again (Replay):
// the relay publishes it at its next claim.
func (d *Dashboard) serveRetry(w http.ResponseWriter, r *http.Request) {
	d.act(w, r, "retried", func(ctx context.Context, id uuid.UUID) (int64, error) {
		return d.opts.Store.Replay(ctx, stores.ReplayParams{IDs: []uuid.UUID{id}, Now: d.opts.Clock.Now()})
	})
}

// serveDiscard deletes the dead event of the form's id (Discard).
func (d *Dashboard) serveDiscard(w http.ResponseWriter, r *http.Request) {
	d.act(w, r, "discarded", func(ctx context.Context, id uuid.UUID) (int64, error) {
		return d.opts.Store.Discard(ctx, stores.DiscardParams{IDs: []uuid.UUID{id}})
	})
}

// act runs one action on the event of the form's id and redirects to the
// page, which says what it did.
func (d *Dashboard) act(w http.ResponseWriter, r *http.Request, done string, do func(context.Context, uuid.UUID) (int64, error)) {
	id, err := uuid.Parse(r.PostFormValue("id"))
	if err != nil {
		http.Error(w, "outbox ui: the form's id is not an event ID (a UUID)", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), d.opts.Timeout)
	defer cancel()
	n, err := do(ctx, id)
	if err != nil {
		d.opts.Logger.Warn("ui: action failed", "action", done, "id", id, "error", err)
		http.Error(w, "outbox ui: "+done+" nothing: "+redact.Text(err.Error()), http.StatusInternalServerError)
		return
	}
	d.opts.Logger.Info("ui: "+done+" a dead event", "id", id, "changed", n)
	q := url.Values{"done": {done}, "n": {strconv.FormatInt(n, 10)}, "id": {id.String()}}
	if s := r.PostFormValue("q"); s != "" {
		q.Set("q", s)
	}
	w.Header().Set("Location", "./?"+q.Encode())
	w.WriteHeader(http.StatusSeeOther)
}

// flash is the line the page shows after an action, from the redirect's
// parameters: known words only, so that a crafted link cannot make the
// page say anything else.
func flash(done, n, id string) string {
	if done != "retried" && done != "discarded" {
		return ""
	}
	uid, err := uuid.Parse(id)
	if err != nil {
		return ""
	}
	if n == "0" {
		return "nothing " + done + ": event " + uid.String() + " is not dead (any more)"
	}
	if done == "retried" {
		return "retried event " + uid.String() + ": it is pending again, and the relay publishes it next"
	}
	return "discarded event " + uid.String() + ": it is deleted"
}
