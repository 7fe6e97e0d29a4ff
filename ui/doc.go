// Package ui is the outbox's web dashboard: an http.Handler, served from
// the Go binary, that shows one outbox table — its backlog and lag over
// time, throughput, the relays of this process and their counters, the
// keys a failing event blocks, the dead events with Retry and Discard
// buttons — and searches it by event ID or key. The page updates itself
// without reloading.
//
// It is server-rendered HTML (html/template) with a small script that
// fetches the panels again every second; the stylesheet and the script are
// embedded, so the page needs nothing from the internet. The charts keep a
// bounded ring of samples in memory (Options.History).
//
// # Wiring
//
//	d, err := ui.New(&ui.Options{Store: db.Store()})
//	d.AddRelay("relay", r.Stats) // optional: a relay of this process
//	go d.Run(ctx)                // optional: sample the charts before a page is open
//	http.Handle("/outbox/", http.StripPrefix("/outbox", d))
//
// The command line serves it with `outbox ui`, `outbox relay --ui-addr`
// and `outbox demo --ui`.
//
// # Security
//
// The dashboard changes the outbox (Retry, Discard), so bind it to a
// loopback address, or set Options.Token: CheckBind says which an address
// needs. With a token every request must carry it (Authorization: Bearer,
// or the cookie that opening the page with ?token= sets). The actions are
// POST requests behind net/http's CrossOriginProtection: a page of another
// site cannot make a browser retry or discard an event.
package ui
