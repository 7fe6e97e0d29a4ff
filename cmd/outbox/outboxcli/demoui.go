package outboxcli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/outboxgo/outbox/relay"
	"github.com/outboxgo/outbox/stores"
	"github.com/outboxgo/outbox/ui"
)

// demoUI is the demo's --ui: the dashboard of the orders service's
// outbox, served from the start of the run until Ctrl-C after its end.
type demoUI struct {
	ctx  context.Context
	addr string
	out  io.Writer
	log  *slog.Logger
	srv  *uiServer
	stop func()
}

// demoSampleEvery samples the demo's charts often: the whole run takes
// seconds.
const demoSampleEvery = 200 * time.Millisecond

// Start implements saga.Watcher.
func (w *demoUI) Start(orders stores.Store) error {
	s, err := listenUI(w.ctx, "--ui", w.addr, &ui.Options{Store: orders, Title: "demo: the orders service's outbox",
		SampleEvery: demoSampleEvery, Logger: w.log})
	if err != nil {
		return err
	}
	w.srv, w.stop = s, s.serve(w.ctx, w.log)
	fmt.Fprintf(w.out, "dashboard: %s (watch the backlog grow during the outage and drain after it)\n", s.url())
	return nil
}

// Relay implements saga.Watcher.
func (w *demoUI) Relay(name string, r *relay.Relay) { w.srv.addRelay(name, r) }

// Done implements saga.Watcher: it keeps the dashboard up until ctx ends.
func (w *demoUI) Done(ctx context.Context) {
	fmt.Fprintf(w.out, "the dashboard stays up at %s: Ctrl-C ends the demo\n", w.srv.url())
	<-ctx.Done()
	w.stop()
}
