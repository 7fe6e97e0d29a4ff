package mqtt_test

import (
	"errors"
	"testing"

	"github.com/eclipse/paho.golang/paho"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/mqtt"
)

func TestDecodeRefuses(t *testing.T) {
	for name, props := range map[string]paho.UserProperties{
		"no id":          {{Key: "outbox-key", Value: "k"}},
		"id not a UUID":  {{Key: mqtt.PropID, Value: "42"}},
		"bad base64":     {{Key: mqtt.PropID, Value: "01a23375-384c-78ad-9cf7-13b0659ae422"}, {Key: "outbox-b64-x", Value: "!!"}},
		"bad created-at": {{Key: mqtt.PropID, Value: "01a23375-384c-78ad-9cf7-13b0659ae422"}, {Key: mqtt.PropCreatedAt, Value: "yesterday"}},
	} {
		_, err := mqtt.Decode(&paho.Publish{Topic: "t", Properties: &paho.PublishProperties{User: props}}, "", 1)
		if !errors.Is(err, inbox.ErrInvalidMessage) || !inbox.IsPermanent(err) {
			t.Errorf("%s: %v, want a permanent ErrInvalidMessage", name, err)
		}
	}
	if _, err := mqtt.Decode(&paho.Publish{Topic: "t"}, "", 1); !errors.Is(err, inbox.ErrInvalidMessage) {
		t.Errorf("no properties: %v, want ErrInvalidMessage", err)
	}
}
