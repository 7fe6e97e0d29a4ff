// Package tcpproxy is a TCP proxy tests put between a client and a shared
// service, to cut the path to it without stopping the service.
package tcpproxy

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections from a local address to a target, and
// can be cut (every connection closed, new ones refused) and restored on
// the same address.
type Proxy struct {
	target string
	Addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// Start starts a proxy to target, stopped at cleanup.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	p := &Proxy{target: target, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p.Addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.Cut)
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
	u, err := net.Dial("tcp", p.target)
	if err != nil || !p.track(u) {
		_ = c.Close()
		if u != nil {
			_ = u.Close()
		}
		return
	}
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		_ = dst.Close()
		_ = src.Close()
	}
	wg.Go(func() { pipe(u, c) })
	wg.Go(func() { pipe(c, u) })
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, u)
	p.mu.Unlock()
}

// Cut closes the listener and every connection, and waits for the
// forwarding goroutines to end.
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

// Restore listens again on the same address.
func (p *Proxy) Restore(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", p.Addr)
	if err != nil {
		t.Fatalf("proxy: listen again on %s: %v", p.Addr, err)
	}
	p.serve(ln)
}
