package ui

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/relay"
	"github.com/outboxgo/outbox/stores"
)

// Defaults for Options.
const (
	// DefaultSampleEvery is how often the charts take a sample of the
	// store's statistics.
	DefaultSampleEvery = time.Second
	// DefaultHistory is how many samples the charts keep: ten minutes at
	// DefaultSampleEvery.
	DefaultHistory = 600
	// DefaultRefresh is how often the page fetches fresh panels.
	DefaultRefresh = time.Second
	// DefaultListLimit is how many blocked keys, dead events and search
	// results a panel lists.
	DefaultListLimit = 20
	// DefaultTimeout bounds the store's queries of one request.
	DefaultTimeout = 5 * time.Second
	// TokenCookie is the cookie that carries the token once a browser
	// opened the dashboard with ?token=.
	TokenCookie = "outbox_ui_token"
)

// Options configure a Dashboard. Every zero field means its default.
type Options struct {
	// Store is the outbox table the dashboard shows and acts on.
	// Required. When it implements stores.Finder, the search finds any
	// event by ID and the pending events of a key; otherwise it finds
	// dead events only.
	Store stores.Store
	// Title names the outbox in the page's heading, e.g. the database's
	// redacted URL. Default "outbox".
	Title string
	// Token, when set, is required of every request: an Authorization:
	// Bearer header, or the cookie that opening the page with ?token=
	// sets. It is compared in constant time and never shown. Default
	// none: for a dashboard bound to a loopback address only (see
	// CheckBind).
	Token string
	// SampleEvery is how often the charts sample the store's statistics
	// (while Run runs, or while a page is open). Default
	// DefaultSampleEvery (1s).
	SampleEvery time.Duration
	// History is how many samples the charts keep, in memory. Default
	// DefaultHistory (600).
	History int
	// Refresh is how often an open page fetches fresh panels. Default
	// DefaultRefresh (1s).
	Refresh time.Duration
	// ListLimit is how many blocked keys, dead events and search results
	// a panel lists. Default DefaultListLimit (20).
	ListLimit int
	// Timeout bounds the store's queries of one request. Default
	// DefaultTimeout (5s).
	Timeout time.Duration
	// Clock tells the time of ages, lags and due times. Default
	// outbox.SystemClock.
	Clock outbox.Clock
	// Logger receives failed store reads and the actions taken (retry,
	// discard), at Warn and Info. Default: discarded.
	Logger *slog.Logger
}

func (o *Options) withDefaults() (Options, error) {
	var out Options
	if o != nil {
		out = *o
	}
	if out.Store == nil {
		return out, errors.New("ui: Options.Store is required")
	}
	if out.SampleEvery < 0 || out.History < 0 || out.Refresh < 0 || out.ListLimit < 0 || out.Timeout < 0 {
		return out, errors.New("ui: Options: SampleEvery, History, Refresh, ListLimit and Timeout must not be negative")
	}
	if out.Title == "" {
		out.Title = "outbox"
	}
	if out.SampleEvery == 0 {
		out.SampleEvery = DefaultSampleEvery
	}
	if out.History == 0 {
		out.History = DefaultHistory
	}
	if out.Refresh == 0 {
		out.Refresh = DefaultRefresh
	}
	if out.ListLimit == 0 {
		out.ListLimit = DefaultListLimit
	}
	if out.Timeout == 0 {
		out.Timeout = DefaultTimeout
	}
	if out.Clock == nil {
		out.Clock = outbox.SystemClock{}
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out, nil
}

//go:embed templates static
var assets embed.FS

// Dashboard is the web dashboard of one outbox table: an http.Handler that
// serves the page, its panels and its actions at paths relative to where
// it is mounted (mount it at / or, with http.StripPrefix, under a prefix
// ending in /).
type Dashboard struct {
	opts    Options
	tmpl    *template.Template
	handler http.Handler
	hist    *history

	mu     sync.Mutex
	relays []relaySource
}

// relaySource is a relay of this process, by name.
type relaySource struct {
	name  string
	stats func() relay.Stats
}

// New returns the dashboard of opts.Store.
func New(opts *Options) (*Dashboard, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	tmpl, err := template.New("").Funcs(funcs).ParseFS(assets, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("ui: templates: %w", err)
	}
	d := &Dashboard{opts: o, tmpl: tmpl, hist: newHistory(o.History)}
	d.handler = d.routes()
	return d, nil
}

// AddRelay shows a relay of this process in the Relays panel, under name,
// with what stats reports (relay.Relay's Stats method), and counts its
// published events into the throughput chart. The table itself records
// no relay: PostgreSQL and MySQL claims are row locks of the claiming
// transaction, so only the relays of this process can be shown.
func (d *Dashboard) AddRelay(name string, stats func() relay.Stats) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.relays = append(d.relays, relaySource{name: name, stats: stats})
}

func (d *Dashboard) relaySources() []relaySource {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]relaySource(nil), d.relays...)
}

// ServeHTTP implements http.Handler.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) { d.handler.ServeHTTP(w, r) }

// routes are the dashboard's paths, behind the token check and the
// protection against cross-site requests.
func (d *Dashboard) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", d.servePage)
	mux.HandleFunc("GET /panels", d.servePanels)
	mux.HandleFunc("POST /retry", d.serveRetry)
	mux.HandleFunc("POST /discard", d.serveDiscard)
	files := http.FileServerFS(assets) // static/… of the embedded files
	mux.HandleFunc("GET /static/{file}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
	return secure(d.opts.Token, http.NewCrossOriginProtection().Handler(mux))
}
