package rabbitmq

import (
	"context"
	"fmt"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxgo/outbox/publishers"
)

var _ publishers.Checker = (*Publisher)(nil)

// checkTopic is the topic of Check's probe message, which is rolled back,
// never delivered.
const checkTopic = "outbox-check"

// Check verifies that the broker accepts the configuration, on a
// connection of its own (closed before Check returns): the handshake with
// the URL's credentials and vhost; the exchange, with a passive declare
// (the default exchange "" always exists); and the permission to publish
// to it, with a probe message published in a transaction (tx.select) that
// is rolled back — RabbitMQ checks the permissions, the exchange and
// whether it is internal when the message is published, and delivers it
// only at a commit that never comes.
//
// It returns an error classified publishers.Misconfigured when the broker
// refuses the credentials (403), the vhost (530), the exchange (404) or
// the publish (403: no write permission, an internal exchange), and
// publishers.Unavailable when it cannot be reached or ctx ends first.
// Topic permissions depend on the routing key, which Check does not know:
// a refusal of the probe's routing key passes here and fails the messages
// of a forbidden routing key at Publish, as Misconfigured.
func (p *Publisher) Check(ctx context.Context) error {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return publishers.Unavailable(fmt.Errorf("rabbitmq publisher: check: %w", ErrClosed))
	}
	if err := ctx.Err(); err != nil {
		return publishers.Unavailable(fmt.Errorf("rabbitmq publisher: check: %w", err))
	}
	conn, err := p.connect(" (check)")
	if err != nil {
		return err
	}
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		err = p.probe(conn)
	}()
	select {
	case <-probed:
	case <-ctx.Done():
		// Closing the socket ends the probe's calls; their failure is the
		// closed socket's, not the broker's.
		_ = conn.CloseDeadline(time.Now())
		<-probed
		return publishers.Unavailable(fmt.Errorf("rabbitmq publisher: check: %w", ctx.Err()))
	}
	_ = conn.CloseDeadline(time.Now().Add(p.cfg.DialTimeout))
	return err
}

// probe checks the exchange and the permission to publish to it on conn.
func (p *Publisher) probe(conn *amqp.Connection) error {
	ch, err := conn.Channel()
	if err != nil {
		return classifyClose(fmt.Errorf("rabbitmq publisher: check: open a channel: %w", err), err)
	}
	closes := ch.NotifyClose(make(chan *amqp.Error, 1))
	fail := func(what string, err error) error {
		// A call on a channel the broker has just closed fails with
		// amqp091's 504 "channel/connection is not open": the broker's
		// reason comes on closes.
		t := time.NewTimer(p.cfg.DialTimeout)
		defer t.Stop()
		select {
		case e, ok := <-closes:
			if ok && e != nil {
				err = e
			}
		case <-t.C:
		}
		if ae := ConfigRefusal(err); ae != nil && strings.Contains(ae.Reason, "access to topic") {
			return nil // the probe's routing key, not the topics'
		}
		return classifyClose(fmt.Errorf("rabbitmq publisher: check: %s: %w", what, err), err)
	}
	if p.cfg.Exchange != "" {
		if err := ch.ExchangeDeclarePassive(p.cfg.Exchange, amqp.ExchangeDirect, false, false, false, false, nil); err != nil {
			return fail(fmt.Sprintf("exchange %q", p.cfg.Exchange), err)
		}
	}
	if err := ch.Tx(); err != nil {
		return fail("tx.select", err)
	}
	err = ch.Publish(p.cfg.Exchange, p.routingKey(checkTopic), false, false, amqp.Publishing{MessageId: checkTopic})
	if err == nil {
		// Synchronous: a refused publish has closed the channel by the
		// time the broker would answer.
		err = ch.TxRollback()
	}
	if err != nil {
		return fail(fmt.Sprintf("publish to exchange %q (rolled back)", p.cfg.Exchange), err)
	}
	_ = ch.Close()
	return nil
}
