package mqtt

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	"github.com/eclipse/paho.golang/paho/session"
	"github.com/eclipse/paho.golang/paho/session/state"

	"github.com/outboxgo/outbox/publishers"
)

// conn is one MQTT connection of the publisher: a paho client, connected,
// with its own in-memory session (Clean Start, Session Expiry 0: nothing
// outlives the connection, so nothing is re-sent behind the relay's back).
type conn struct {
	client *paho.Client
	sess   *trackingSession
	done   <-chan struct{} // closed once the client has shut down

	// From the CONNACK.
	maxPacket uint32 // the broker's Maximum Packet Size; 0: none
	maxQoS    byte
	retainOK  bool

	// sendMu orders the sends of the connection: held while one PUBLISH
	// is handed to paho (quota, packet ID, write), so a call's messages
	// go out in its order and each PUBLISH finds its waiter.
	sendMu sync.Mutex
}

// dial opens a connection to b and completes the MQTT handshake. The
// error is classified: Misconfigured when the broker refuses the
// credentials or the client, Unavailable when it cannot be reached.
func (p *Publisher) dial(ctx context.Context) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ConnectTimeout)
	defer cancel()
	where := p.where
	var nc net.Conn
	var err error
	if p.url.tls {
		d := tls.Dialer{Config: p.tlsConfig}
		nc, err = d.DialContext(ctx, "tcp", p.url.addr)
	} else {
		var d net.Dialer
		nc, err = d.DialContext(ctx, "tcp", p.url.addr)
	}
	if err != nil {
		return nil, classifyDial(fmt.Errorf("mqtt: connect to %s: %w", where, err))
	}
	sess := &trackingSession{State: state.NewInMemory()}
	c := &conn{sess: sess}
	c.client = paho.NewClient(paho.ClientConfig{
		Conn:          packets.NewThreadSafeConn(nc),
		Session:       sess,
		PacketTimeout: p.cfg.AckTimeout,
		// Nothing arrives but acknowledgements: PUBLISH packets from the
		// broker (there are no subscriptions) are dropped.
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(paho.PublishReceived) (bool, error) { return true, nil }},
		OnClientError:     func(err error) { p.log.Debug("mqtt publisher: connection lost", "url", where, "error", err) },
		OnServerDisconnect: func(d *paho.Disconnect) {
			p.log.Warn("mqtt publisher: the broker closed the connection", "url", where, "reason", reasonText(d.ReasonCode))
		},
	})
	cp := &paho.Connect{
		ClientID:   p.cfg.ClientID,
		CleanStart: true,
		KeepAlive:  uint16(p.cfg.KeepAlive.Seconds()),
	}
	if p.url.hasUser {
		cp.Username, cp.UsernameFlag = p.url.user, true
	}
	if p.url.hasPass {
		cp.Password, cp.PasswordFlag = []byte(p.url.password), true
	}
	ca, err := c.client.Connect(ctx, cp)
	if err != nil {
		_ = sess.State.Close()
		if ca != nil && ca.ReasonCode >= 0x80 {
			why := ""
			if ca.Properties != nil && ca.Properties.ReasonString != "" {
				why = fmt.Sprintf(" (%q)", ca.Properties.ReasonString)
			}
			return nil, classifyConnack(fmt.Errorf("mqtt: connect to %s: the broker refused the connection: CONNACK %s%s", where, reasonText(ca.ReasonCode), why), ca.ReasonCode)
		}
		return nil, classifyDial(fmt.Errorf("mqtt: connect to %s: %w", where, err))
	}
	c.done = c.client.Done()
	c.maxQoS, c.retainOK = 2, true
	if ca.Properties != nil {
		if ca.Properties.MaximumPacketSize != nil {
			c.maxPacket = *ca.Properties.MaximumPacketSize
		}
		if ca.Properties.MaximumQoS != nil {
			c.maxQoS = *ca.Properties.MaximumQoS
		}
		c.retainOK = ca.Properties.RetainAvailable
	}
	if err := p.checkConnack(c); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// checkConnack refuses a broker that cannot take what the configuration
// asks: QoS 1, and retained messages when Retain is set.
func (p *Publisher) checkConnack(c *conn) error {
	switch {
	case c.maxQoS < 1:
		return publishers.Misconfigured(fmt.Errorf("mqtt: %s: the broker's Maximum QoS is 0; the publisher needs QoS 1 for acknowledgements", p.where))
	case p.cfg.Retain && !c.retainOK:
		return publishers.Misconfigured(fmt.Errorf("mqtt: %s: the broker does not support retained messages, and retain is set", p.where))
	}
	return nil
}

// alive reports whether the connection is still up.
func (c *conn) alive() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// close disconnects (normal disconnection) and waits until the client's
// goroutines are gone.
func (c *conn) close() {
	if c.alive() {
		_ = c.client.Disconnect(&paho.Disconnect{ReasonCode: 0})
	}
	<-c.done
	_ = c.sess.State.Close()
}

// lostError is the error of a message whose PUBACK never came because the
// connection ended, classified: with the broker's reason when it sent a
// DISCONNECT, Misconfigured when that reason is an authorization's, else
// Unavailable.
func (c *conn) lostError(clientID string) error {
	code, ok := c.sess.disconnectReason()
	if !ok {
		return publishers.Unavailable(errConnLost)
	}
	err := fmt.Errorf("%w: the broker disconnected: %s", errConnLost, reasonText(code))
	switch code {
	case 0x86, 0x87, 0x8A: // Bad User Name or Password, Not authorized, Banned
		return publishers.Misconfigured(err)
	case 0x8E: // Session taken over
		return publishers.Unavailable(fmt.Errorf("%w (another connection uses the client ID %q)", err, clientID))
	}
	return publishers.Unavailable(err)
}

// errConnLost: the connection ended before the broker acknowledged.
var errConnLost = errors.New("connection lost before the broker acknowledged")

// trackingSession is paho's in-memory session state, with the channel
// each PUBLISH reports its acknowledgement on supplied by the publisher
// (paho's asynchronous send gives no way to learn the outcome), and the
// broker's DISCONNECT reason kept.
type trackingSession struct {
	*state.State

	mu       sync.Mutex
	next     chan packets.ControlPacket // the waiter of the PUBLISH being sent
	reason   byte
	gotReply bool
}

var _ session.SessionManager = (*trackingSession)(nil)

// AddToSession hands the PUBLISH being sent the publisher's channel.
func (s *trackingSession) AddToSession(ctx context.Context, packet session.Packet, resp chan<- packets.ControlPacket) error {
	if packet.Type() == packets.PUBLISH {
		s.mu.Lock()
		if s.next != nil {
			resp, s.next = s.next, nil
		}
		s.mu.Unlock()
	}
	return s.State.AddToSession(ctx, packet, resp)
}

// expect sets the channel of the next PUBLISH; the caller holds the
// connection's sendMu.
func (s *trackingSession) expect(ch chan packets.ControlPacket) {
	s.mu.Lock()
	s.next = ch
	s.mu.Unlock()
}

// ConnectionLost keeps the reason of a DISCONNECT from the broker.
func (s *trackingSession) ConnectionLost(dp *packets.Disconnect) error {
	if dp != nil {
		s.mu.Lock()
		s.reason, s.gotReply = dp.ReasonCode, true
		s.mu.Unlock()
	}
	return s.State.ConnectionLost(dp)
}

func (s *trackingSession) disconnectReason() (byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason, s.gotReply
}
