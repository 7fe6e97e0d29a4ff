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
