package ui

import (
	"context"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/outboxgo/outbox/stores"
)

// seenRow is one relay seen connected to the database: the connections of
// one application name (stores.SessionLister).
type seenRow struct {
	Name        string
	Clients     string // the clients' hosts, distinct, in order
	Connections int
	// Claim is how long the oldest open transaction of its connections
	// has run ("" when none): a claim held, being published.
	Claim     string
	Connected string // how long ago its first connection opened
}

// seen lists the relays connected to the database, when the store can
// tell (stores.SessionLister); ok is false when it cannot.
func (d *Dashboard) seen(ctx context.Context, now time.Time) (rows []seenRow, ok bool, err error) {
	l, ok := d.opts.Store.(stores.SessionLister)
	if !ok {
		return nil, false, nil
	}
	sessions, err := l.Sessions(ctx)
	if err != nil {
		return nil, true, err
	}
	by := map[string]*seenRow{}
	first := map[string]time.Time{}
	oldestTx := map[string]time.Time{}
	clients := map[string][]string{}
	var names []string
	for _, s := range sessions {
		r := by[s.Application]
		if r == nil {
			r = &seenRow{Name: s.Application}
			by[s.Application] = r
			names = append(names, s.Application)
		}
		r.Connections++
		if c := first[s.Application]; c.IsZero() || s.Connected.Before(c) {
			first[s.Application] = s.Connected
		}
		if t := oldestTx[s.Application]; !s.InTxSince.IsZero() && (t.IsZero() || s.InTxSince.Before(t)) {
			oldestTx[s.Application] = s.InTxSince
		}
		host := s.Client
		if h, _, err := net.SplitHostPort(s.Client); err == nil {
			host = h // one client's connections differ by port only
		}
		if !contains(clients[s.Application], host) {
			clients[s.Application] = append(clients[s.Application], host)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		r := by[n]
		r.Clients = strings.Join(clients[n], ", ")
		r.Connected = seconds(max(now.Sub(first[n]), 0).Seconds())
		if t := oldestTx[n]; !t.IsZero() {
			r.Claim = seconds(max(now.Sub(t), 0).Seconds())
		}
		rows = append(rows, *r)
	}
	return rows, true, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
