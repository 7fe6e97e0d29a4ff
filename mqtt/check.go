package mqtt

import (
	"context"
	"fmt"

	"github.com/outboxgo/outbox/publishers"
)

var _ publishers.Checker = (*Publisher)(nil)

// Check verifies that the broker accepts the configuration: it connects
// (unless the publisher is connected already), which proves the
// credentials and the client ID (the CONNACK's reason code), and that the
// broker takes QoS 1 (and retained messages, when Retain is set). The
// connection stays open for the publishes that follow.
//
// It returns an error classified publishers.Misconfigured when the broker
// refuses the configuration (0x86 Bad User Name or Password, 0x87 Not
// authorized — Mosquitto's answer to a wrong password as well —, 0x85
// Client Identifier not valid, 0x8A Banned, …, or a TLS certificate
// the configuration does not trust), publishers.Unavailable when the
// broker cannot be reached or is busy. MQTT has no way to ask whether a
// user may publish to a topic without publishing: a topic the broker's
// ACL forbids fails its messages at Publish (PUBACK 0x87, Misconfigured).
func (p *Publisher) Check(ctx context.Context) error {
	p.rw.RLock()
	defer p.rw.RUnlock()
	if p.isClosed() {
		return publishers.Unavailable(fmt.Errorf("mqtt publisher: check: %w", ErrClosed))
	}
	ctx, cancel := p.callContext(ctx)
	defer cancel()
	if _, err := p.connection(ctx); err != nil {
		return fmt.Errorf("mqtt publisher: check: %w", err)
	}
	return nil
}
