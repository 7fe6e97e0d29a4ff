// Package tcpproxy is a TCP proxy tests put between a client and a server,
// to play a bad network without touching the server: it can cut the path
// (close every connection, refuse new ones), drop every connection, and
// stall (hold every connection open and forward nothing).
package tcpproxy

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy forwards TCP connections from a local address to a target.
type Proxy struct {
	target string
	Addr   string // host:port of 127.0.0.1 the proxy listens on

	mu      sync.Mutex
	ln      net.Listener // nil while cut
	conns   map[net.Conn]struct{}
	open    chan struct{} // closed while forwarding; a fresh one while stalled
	stalled bool
	wg      sync.WaitGroup
}

// Start starts a proxy to target on a free port of 127.0.0.1; it is cut at
// cleanup.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	p := &Proxy{target: target, conns: map[net.Conn]struct{}{}, open: make(chan struct{})}
	close(p.open)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p.Addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() { p.Stall(false); p.Cut() })
	return p
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.forward(c) })
		}
	})
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) forward(c net.Conn) {
	if !p.track(c) {
		return
	}
	u, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil || !p.track(u) {
		_ = c.Close()
		if u != nil {
			_ = u.Close()
		}
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(u, c) })
	wg.Go(func() { p.pipe(c, u) })
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, u)
	p.mu.Unlock()
}

// pipe copies src to dst, holding each chunk while the proxy is stalled,
// and closes both when either side ends.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			open := p.open
			p.mu.Unlock()
			<-open // held here while stalled; Cut and Drop close the conns
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // io.EOF included: the other side closed
			return
		}
	}
}

// Cut closes the listener and every connection, and waits for the
// forwarding goroutines to end: clients get "connection refused" until
// Restore. A stalled proxy stays stalled.
func (p *Proxy) Cut() {
	p.mu.Lock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// Restore listens again on the same address after a Cut.
func (p *Proxy) Restore(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", p.Addr)
	if err != nil {
		t.Fatalf("proxy: listen again on %s: %v", p.Addr, err)
	}
	p.serve(ln)
}

// Drop closes every open connection; new ones are accepted as before.
func (p *Proxy) Drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// Stall stops (on) or resumes (off) forwarding; connections stay open and
// what they carried while stalled is delivered on resume.
func (p *Proxy) Stall(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on == p.stalled {
		return
	}
	p.stalled = on
	if on {
		p.open = make(chan struct{})
	} else {
		close(p.open)
	}
}
