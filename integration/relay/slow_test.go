package relay_test

import (
	"context"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
)

// slowPublisher adds a fixed delay to every Publish call before the real
// publisher's acknowledgements count: a broker farther away than loopback,
// so that the broker, not the 2-core CPU, limits a relay.
type slowPublisher struct {
	publishers.Publisher
	delay time.Duration
}

func (p slowPublisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := p.Publisher.Publish(ctx, msgs)
	t := time.NewTimer(p.delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return errs
}

// perAckPublisher makes the broker the bottleneck: acknowledgements come
// one after the other, each taking delay, as from a broker that stores one
// message at a time.
type perAckPublisher struct {
	publishers.Publisher
	delay time.Duration
}

func (p perAckPublisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	return slowPublisher{Publisher: p.Publisher, delay: time.Duration(len(msgs)) * p.delay}.Publish(ctx, msgs)
}
