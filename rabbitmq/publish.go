package rabbitmq

import (
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
)

// Publish publishes msgs pipelined on one channel, then waits for every
// confirm, for PublisherConfig.ConfirmTimeout or for ctx. It returns one error per
// message, nil when the broker confirmed it and did not return it. See the
// package documentation for how errors are classified.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := make([]error, len(msgs))
	if len(msgs) == 0 {
		return errs
	}
	// The messages the publisher never sends fail the same way whatever
	// happens to the others: first, before anything is sent.
	for i := range msgs {
		errs[i] = p.refuseLocally(&msgs[i])
	}
	fail := func(from int, err error) []error {
		for i := from; i < len(msgs); i++ {
			if errs[i] == nil {
				errs[i] = fmt.Errorf("rabbitmq publish %s: %w", msgs[i].ID, err)
			}
		}
		return errs
	}
	if err := ctx.Err(); err != nil {
		return fail(0, publishers.Unavailable(fmt.Errorf("not sent: %w", err)))
	}
	s, err := p.current()
	if err != nil {
		return fail(0, err)
	}
	if why := s.blockedBy(); why != "" {
		// Publishing now would block on the socket, past any deadline.
		return fail(0, publishers.Unavailable(fmt.Errorf("not sent: %w: %s", ErrBlocked, why)))
	}
	dcs := make([]*amqp.DeferredConfirmation, len(msgs))
	for i := range msgs {
		if errs[i] != nil {
			continue
		}
		m := &msgs[i]
		if err := ctx.Err(); err != nil {
			fail(i, publishers.Unavailable(fmt.Errorf("not sent: %w", err)))
			break
		}
		dc, err := s.ch.PublishWithDeferredConfirmWithContext(ctx, p.cfg.Exchange, p.routingKey(m.Topic), true, false, publishing(m))
		if err == nil && dc == nil {
			// amqp091 returns no confirmation when the channel left
			// confirm mode: it closed under us.
			err = ErrNoChannel
		}
		if err != nil {
			// The ones sent before still get their outcome below.
			fail(i, publishers.Unavailable(fmt.Errorf("not sent: %w", err)))
			break
		}
		dcs[i] = dc
	}
	p.await(ctx, msgs, dcs, errs)
	s.awaitClose(p.cfg.ConfirmTimeout)
	s.sync()
	for i, dc := range dcs {
		if dc == nil || errs[i] != nil {
			continue
		}
		m := &msgs[i]
		returned := s.claimReturned(m.ID.String())
		switch {
		case !dc.Acked() && s.dead():
			errs[i] = s.lost(m.ID.String())
		case !dc.Acked():
			errs[i] = fmt.Errorf("rabbitmq publish %s: %w", m.ID, ErrNacked)
		case returned:
			errs[i] = fmt.Errorf("rabbitmq publish %s to exchange %q with routing key %q: %w", m.ID, p.cfg.Exchange, p.routingKey(m.Topic), ErrUnroutable)
		}
	}
	switch {
	case s.configRefusal() != nil:
		// Nobody's fault but the configuration's: every message that
		// failed with the channel fails as Misconfigured.
		why := s.configRefusal()
		for i, err := range errs {
			if publishers.IsUnavailable(err) {
				errs[i] = publishers.Misconfigured(fmt.Errorf("rabbitmq publish %s: %w: %w", msgs[i].ID, ErrConfigRefused, why))
			}
		}
	case s.refusal() != nil:
		p.isolate(ctx, msgs, errs, s.refusal())
	}
	return errs
}

// await waits for the confirms of dcs — for PublisherConfig.ConfirmTimeout, ctx or
// Close — and fails those that did not come as unavailable.
func (p *Publisher) await(ctx context.Context, msgs []outbox.Message, dcs []*amqp.DeferredConfirmation, errs []error) {
	timer := time.NewTimer(p.cfg.ConfirmTimeout)
	defer timer.Stop()
	for i, dc := range dcs {
		if dc == nil || done(dc) {
			continue
		}
		var why error
		select {
		case <-dc.Done():
			continue
		case <-ctx.Done():
			why = fmt.Errorf("no confirm before the context ended: %w", ctx.Err())
		case <-timer.C:
			why = fmt.Errorf("no confirm within %v", p.cfg.ConfirmTimeout)
		case <-p.done:
			why = fmt.Errorf("no confirm before Close: %w", ErrClosed)
		}
		for j := i; j < len(dcs); j++ {
			if dcs[j] != nil && !done(dcs[j]) {
				errs[j] = publishers.Unavailable(fmt.Errorf("rabbitmq publish %s: %w", msgs[j].ID, why))
				dcs[j] = nil
			}
		}
		return
	}
}

// isolate handles a batch whose channel the broker closed because it
// refused a message (see refusal): the close does not say which one — nor
// whether it was this batch's or that of a concurrent Publish sharing the
// channel — and every message in flight failed as unavailable, as it would
// on every retry. Each of them is published again alone, in order, on a
// channel of its own: the refused ones fail as permanent, the others go
// out.
func (p *Publisher) isolate(ctx context.Context, msgs []outbox.Message, errs []error, refusal *amqp.Error) {
	var suspects []int
	for i, err := range errs {
		if publishers.IsUnavailable(err) {
			suspects = append(suspects, i)
		}
	}
	p.log.Warn("rabbitmq publisher: the broker refused a message and closed the channel; publishing the unconfirmed messages one at a time to find it",
		"messages", len(suspects), "reason", refusal.Reason)
	for _, i := range suspects {
		if ctx.Err() != nil {
			return // the rest keep their unavailable errors
		}
		errs[i] = p.publishAlone(ctx, &msgs[i])
	}
}

// publishAlone publishes m on a confirm-mode channel of its own and waits
// for its confirm: nothing else shares the channel, so a close is m's. It
// checks m as Publish does first.
func (p *Publisher) publishAlone(ctx context.Context, m *outbox.Message) error {
	if err := p.refuseLocally(m); err != nil {
		return err
	}
	s, err := p.current()
	if err != nil {
		return fmt.Errorf("rabbitmq publish %s: %w", m.ID, err)
	}
	unavailable := func(err error) error {
		return publishers.Unavailable(fmt.Errorf("rabbitmq publish %s: %w", m.ID, err))
	}
	ch, err := s.conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		return classifyClose(fmt.Errorf("rabbitmq publish %s: open a channel: %w", m.ID, err), err)
	}
	defer func() { _ = ch.Close() }()
	closes := ch.NotifyClose(make(chan *amqp.Error, 1))
	returns := ch.NotifyReturn(make(chan amqp.Return, 1))
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, p.cfg.Exchange, p.routingKey(m.Topic), true, false, publishing(m))
	if err == nil && dc == nil {
		err = ErrNoChannel
	}
	if err != nil {
		return unavailable(fmt.Errorf("not sent: %w", err))
	}
	timer := time.NewTimer(p.cfg.ConfirmTimeout)
	defer timer.Stop()
	select {
	case <-dc.Done():
	case <-ctx.Done():
		return unavailable(fmt.Errorf("no confirm before the context ended: %w", ctx.Err()))
	case <-timer.C:
		return unavailable(fmt.Errorf("no confirm within %v", p.cfg.ConfirmTimeout))
	case <-p.done:
		return unavailable(fmt.Errorf("no confirm before Close: %w", ErrClosed))
	}
	if dc.Acked() {
		select {
		case <-returns: // a return comes before its ack
			return fmt.Errorf("rabbitmq publish %s to exchange %q with routing key %q: %w", m.ID, p.cfg.Exchange, p.routingKey(m.Topic), ErrUnroutable)
		default:
			return nil
		}
	}
	select {
	case e, ok := <-closes:
		switch {
		case ok && e != nil && e.Code == amqp.PreconditionFailed && !s.conn.IsClosed():
			return publishers.Permanent(fmt.Errorf("rabbitmq publish %s: %w: %s", m.ID, ErrMessageRefused, e.Reason))
		case ok && e != nil && ConfigRefusal(e) != nil:
			return publishers.Misconfigured(fmt.Errorf("rabbitmq publish %s: %w: %w", m.ID, ErrConfigRefused, e))
		case ok && e != nil:
			return unavailable(fmt.Errorf("%w: %w", ErrNoChannel, e))
		}
	case <-timer.C:
	}
	return fmt.Errorf("rabbitmq publish %s: %w", m.ID, ErrNacked)
}

func done(dc *amqp.DeferredConfirmation) bool {
	select {
	case <-dc.Done():
		return true
	default:
		return false
	}
}
