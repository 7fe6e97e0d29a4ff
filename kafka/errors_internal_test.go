package kafka

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxgo/outbox/publishers"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{kerr.MessageTooLarge, "permanent"},
		{fmt.Errorf("x: %w (uncompressed_bytes=1)", kerr.MessageTooLarge), "permanent"},
		{kerr.InvalidRecord, "permanent"},
		{kerr.UnknownTopicOrPartition, "unavailable"},
		{kerr.NotLeaderForPartition, "unavailable"},
		{kerr.NotEnoughReplicas, "unavailable"},
		{kgo.ErrRecordTimeout, "unavailable"},
		{kgo.ErrClientClosed, "unavailable"},
		{context.DeadlineExceeded, "unavailable"},
		{kerr.TopicAuthorizationFailed, "misconfigured"},
		{kerr.ClusterAuthorizationFailed, "misconfigured"},
		{kerr.SaslAuthenticationFailed, "misconfigured"},
		{kerr.GroupAuthorizationFailed, "misconfigured"},
		{kerr.UnsupportedSaslMechanism, "misconfigured"},
		{kerr.PolicyViolation, "plain"},
		{errors.New("something else"), "plain"},
	} {
		got := classify(fmt.Errorf("wrapped: %w", c.err))
		kind := "plain"
		switch {
		case publishers.IsPermanent(got):
			kind = "permanent"
		case publishers.IsUnavailable(got):
			kind = "unavailable"
		}
		if publishers.IsMisconfigured(got) {
			if kind != "plain" {
				t.Errorf("classify(%v) is both misconfigured and %s", c.err, kind)
			}
			kind = "misconfigured"
		}
		if kind != c.want {
			t.Errorf("classify(%v) is %s, want %s", c.err, kind, c.want)
		}
	}
}
