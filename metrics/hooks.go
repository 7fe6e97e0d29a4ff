package metrics

import (
	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/relay"
	"github.com/outboxgo/outbox/subscribers"
)

// Failure reasons, the values of outbox_publish_failures_total's reason
// label.
const (
	ReasonUnavailable = "unavailable"
	ReasonRefused     = "refused"
	ReasonPermanent   = "permanent"
	ReasonOther       = "other"
)

// Reason classifies a publish error as outbox_publish_failures_total's
// reason label does.
func Reason(err error) string {
	switch {
	case publishers.IsMisconfigured(err):
		return ReasonRefused
	case publishers.IsUnavailable(err):
		return ReasonUnavailable
	case publishers.IsPermanent(err):
		return ReasonPermanent
	}
	return ReasonOther
}

// RelayHooks returns hooks for relay.Config.Hooks that feed the relay's
// metrics, then call next's (the program's own hooks; the zero Hooks for
// none). They also keep the state the readiness check reads: whether the
// relay's last batch paused it.
func (m *Metrics) RelayHooks(next relay.Hooks) relay.Hooks {
	m.coll.hooked.Store(true)
	return relay.Hooks{
		AfterPublish: func(msgs []outbox.Message, errs []error) {
			m.afterPublish(msgs, errs)
			if next.AfterPublish != nil {
				next.AfterPublish(msgs, errs)
			}
		},
		AfterComplete: func(res relay.BatchResult) {
			m.afterComplete(res)
			if next.AfterComplete != nil {
				next.AfterComplete(res)
			}
		},
		AfterClaim: func(c relay.ClaimResult) {
			m.afterClaim(c)
			if next.AfterClaim != nil {
				next.AfterClaim(c)
			}
		},
		AfterCompleteFailed: func(res relay.BatchResult, err error) {
			m.afterCompleteFailed(res)
			if next.AfterCompleteFailed != nil {
				next.AfterCompleteFailed(res, err)
			}
		},
	}
}

func (m *Metrics) afterClaim(c relay.ClaimResult) {
	m.claimDuration.Observe(c.Elapsed.Seconds())
}

// afterCompleteFailed counts a batch whose outcome the store did not
// take: its acknowledged events will be published again.
func (m *Metrics) afterCompleteFailed(res relay.BatchResult) {
	m.publishDuration.Observe(res.PublishElapsed.Seconds())
	m.completeDuration.Observe(res.CompleteElapsed.Seconds())
	m.unmarked.Add(float64(res.Published))
}

func (m *Metrics) afterPublish(msgs []outbox.Message, errs []error) {
	now := m.clock.Now()
	for i := range msgs {
		msg := &msgs[i]
		topic := m.topics.label(msg.Topic)
		if i >= len(errs) || errs[i] == nil {
			m.published.WithLabelValues(topic).Inc()
			from := msg.CreatedAt
			if msg.NotBefore.After(from) {
				from = msg.NotBefore
			}
			if !from.IsZero() {
				m.publishLatency.Observe(max(now.Sub(from).Seconds(), 0))
			}
			continue
		}
		m.failures.WithLabelValues(topic, Reason(errs[i])).Inc()
	}
}

func (m *Metrics) afterComplete(res relay.BatchResult) {
	if res.Claimed > 0 {
		m.batchSize.Observe(float64(res.Claimed))
		m.batchDuration.Observe(res.Elapsed.Seconds())
		m.publishDuration.Observe(res.PublishElapsed.Seconds())
		m.completeDuration.Observe(res.CompleteElapsed.Seconds())
	}
	m.retried.Add(float64(res.Retried))
	m.deadLettered.Add(float64(res.Dead))
	m.deferred.Add(float64(res.Deferred))
	m.pause.batch(res, m.clock.Now())
}

// SubscriberHooks returns hooks for a subscriber's Options.Hooks that feed
// the subscriber's metrics, then call next's (the zero Hooks for none).
func (m *Metrics) SubscriberHooks(next subscribers.Hooks) subscribers.Hooks {
	return subscribers.Hooks{
		AfterCommit: next.AfterCommit,
		AfterSettle: func(s subscribers.Settlement) {
			m.afterSettle(s)
			if next.AfterSettle != nil {
				next.AfterSettle(s)
			}
		},
	}
}

func (m *Metrics) afterSettle(s subscribers.Settlement) {
	topic := m.topics.label(s.Message.Topic)
	m.deliveries.WithLabelValues(topic, s.Action.String()).Inc()
	if s.Outcome == inbox.Duplicate {
		m.duplicates.WithLabelValues(topic).Inc()
	}
}
