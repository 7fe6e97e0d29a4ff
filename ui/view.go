package ui

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/stores"
)

// view is what the page's panels show, read from the store for one request.
type view struct {
	Title   string
	Now     time.Time
	Refresh int64 // milliseconds
	Query   string
	Flash   string
	Err     string // a failed read of the store, shown instead of its panel

	Total  stores.TopicStats
	Lag    string
	Topics []stores.TopicStats
	Charts []chart

	Relays []relayRow
	// Seen are the relays connected to the database; CanSee says the
	// store can list them (stores.SessionLister).
	Seen   []seenRow
	CanSee bool

	Blocked     []stores.BlockedKey
	BlockedMore bool

	Dead      []stores.Record
	DeadTotal int64

	Searched  bool
	Found     []stores.Found
	FoundMore bool
	SearchMsg string
}

// relayRow is one relay of this process.
type relayRow struct {
	Name                                 string
	Claims, Batches, Published, Retried  int64
	Dead, Outages, Refusals, StoreErrors int64
	State                                string
}

// build reads what the panels show. A failed read leaves its panel with
// the error and the others as they are.
func (d *Dashboard) build(ctx context.Context, query, flash string) *view {
	ctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	defer cancel()
	now := d.opts.Clock.Now()
	v := &view{Title: d.opts.Title, Now: now, Refresh: d.opts.Refresh.Milliseconds(), Query: query, Flash: flash}
	var errs []error
	st := d.sampleIfDue(ctx)
	if st == nil {
		var err error
		if st, err = d.opts.Store.Stats(ctx, stores.StatsParams{Now: now}); err != nil {
			errs = append(errs, fmt.Errorf("statistics: %w", err))
		}
	}
	v.Topics, v.Total = st, sum(st)
	v.Lag = seconds(lag(v.Total.OldestDue, now).Seconds())
	samples := d.hist.samples()
	v.Charts = []chart{makeChart(samples, backlogSeries), makeChart(samples, lagSeries), makeChart(samples, throughputSeries)}
	v.Relays = d.relayRows(now)
	seen, canSee, err := d.seen(ctx, now)
	if err != nil {
		errs = append(errs, fmt.Errorf("relays seen: %w", err))
	}
	v.Seen, v.CanSee = seen, canSee

	limit := d.opts.ListLimit
	blocked, err := d.opts.Store.Blocked(ctx, stores.BlockedParams{Limit: limit + 1})
	if err != nil {
		errs = append(errs, fmt.Errorf("blocked keys: %w", err))
	}
	v.BlockedMore = len(blocked) > limit
	v.Blocked = blocked[:min(len(blocked), limit)]
	if v.Dead, err = d.opts.Store.Dead(ctx, stores.DeadParams{Limit: limit}); err != nil {
		errs = append(errs, fmt.Errorf("dead events: %w", err))
	}
	if v.DeadTotal, err = d.opts.Store.DeadCount(ctx, stores.DeadParams{}); err != nil {
		errs = append(errs, fmt.Errorf("dead events: %w", err))
	}
	if query != "" {
		v.Searched = true
		if err := d.search(ctx, v, query); err != nil {
			errs = append(errs, fmt.Errorf("search: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		if ctx.Err() == nil {
			d.opts.Logger.Warn("ui: reading the outbox failed", "error", err)
		}
		v.Err = redact.Text(strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return v
}

// search looks query up as an event ID, or else as a key: through
// stores.Finder when the store has it, among the dead events otherwise.
func (d *Dashboard) search(ctx context.Context, v *view, query string) error {
	limit := d.opts.ListLimit
	id, idErr := uuid.Parse(query)
	p := stores.FindParams{Key: query, Limit: limit + 1}
	if idErr == nil {
		p = stores.FindParams{ID: id}
	}
	if f, ok := d.opts.Store.(stores.Finder); ok {
		found, err := f.Find(ctx, p)
		if err != nil {
			return err
		}
		v.FoundMore = len(found) > limit
		v.Found = found[:min(len(found), limit)]
	} else {
		dp := stores.DeadParams{Key: query, Limit: limit + 1}
		if idErr == nil {
			dp = stores.DeadParams{IDs: []uuid.UUID{id}}
		}
		recs, err := d.opts.Store.Dead(ctx, dp)
		if err != nil {
			return err
		}
		v.FoundMore = len(recs) > limit
		for _, r := range recs[:min(len(recs), limit)] {
			v.Found = append(v.Found, stores.Found{Record: r, State: stores.StateDead})
		}
		v.SearchMsg = "this store searches dead events only (it does not implement stores.Finder)"
	}
	switch {
	case len(v.Found) > 0:
	case idErr == nil:
		v.SearchMsg = "no event with this ID: never enqueued, or published and deleted (or purged)"
	default:
		v.SearchMsg = "no pending or dead event with this key (published events are not searched by key)"
	}
	return nil
}

func (d *Dashboard) relayRows(now time.Time) []relayRow {
	var rows []relayRow
	for _, r := range d.relaySources() {
		st := r.stats()
		state := "running"
		switch {
		case st.Paused && st.Refused:
			state = "paused " + seconds(now.Sub(st.PausedSince).Seconds()) + ": the broker refuses its configuration"
		case st.Paused:
			state = "paused " + seconds(now.Sub(st.PausedSince).Seconds()) + ": the broker is unavailable"
		}
		rows = append(rows, relayRow{Name: r.name, Claims: st.Claims, Batches: st.Batches, Published: st.Published,
			Retried: st.Retried, Dead: st.Dead, Outages: st.Outages, Refusals: st.Refusals, StoreErrors: st.StoreErrors,
			State: state})
	}
	return rows
}
