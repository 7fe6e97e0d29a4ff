package nats

import (
	"context"

	"github.com/nats-io/nats.go"
)

// Stop stops fetching, waits for in-flight handlers to finish and their
// messages to be acknowledged, and hands back messages not yet started.
// When ctx ends first it cancels the handlers' context, waits for them to
// return and returns ctx's error. Stop before Start, or twice, is a no-op.
//
// Stop does not wait on a server it cannot reach: while the connection is
// down (at Stop or during it), and once ctx has ended, it stops waiting
// for the iterator to drain and for the server to confirm acks. The
// messages so left unacknowledged — fetched and not started, or handled
// and committed with an ack the server never got — are not lost:
// JetStream redelivers them after AckWait, and the inbox takes a handled
// one for the duplicate it is.
func (s *Subscriber[TTx]) Stop(ctx context.Context) error {
	// Not abandon: before Start there is no iterator to stop, and after
	// it halt has drained or stopped it.
	defer context.AfterFunc(ctx, s.giveUp)()
	return s.lc.Stop(ctx, s.halt)
}

// halt stops fetching: it drains the iterator (its buffered messages go on
// to the reader, which hands them back) while the connection is up, and
// gives up on the server at once while it is down — draining would wait
// on a flush the server cannot answer.
func (s *Subscriber[TTx]) halt() {
	if !s.js.Conn().IsConnected() {
		s.abandon()
		return
	}
	s.iter.Drain()
}

// watch gives up on the server when the connection is down during Stop,
// until finished (the reader and the workers have returned). It reads
// status, the connection's changes, all along, so that none is dropped
// for a full channel, and stops listening when it returns.
func (s *Subscriber[TTx]) watch(status chan nats.Status, finished <-chan struct{}) {
	nc := s.js.Conn()
	defer nc.RemoveStatusListener(status)
	stopping := s.lc.Stopping()
	for {
		select {
		case <-finished:
			return
		case <-status:
		case <-stopping:
			stopping = nil // seen; from now on every change is looked at
		}
		if s.lc.Stopped() && !nc.IsConnected() {
			s.abandon()
		}
	}
}

// abandon gives up on the server during Stop: the iterator stops (a no-op
// once it drains), the reader stops waiting on it, and acks and
// dead-letter publishes stop waiting for the server (see serverContext).
func (s *Subscriber[TTx]) abandon() {
	s.giveUp()
	s.iter.Stop()
}

// serverContext bounds a wait on the server's answer (an ack's
// confirmation, a dead-letter publish): SubscriberConfig.AckTimeout, ctx (the
// handlers' context, which a hard Stop cancels), and a Stop that gave up
// on the server.
func (s *Subscriber[TTx]) serverContext(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithTimeout(ctx, s.cfg.AckTimeout)
	stop := context.AfterFunc(s.gone, cancel)
	return c, func() {
		stop()
		cancel()
	}
}
