package sqs

import (
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/outboxgo/outbox"
)

// EncodeForTest is the body and attributes the Publisher sends for m.
func EncodeForTest(m *outbox.Message) (string, map[string]types.MessageAttributeValue, int) {
	e, err := encodeMessage(m)
	if err != nil {
		panic(err)
	}
	return e.body, e.attrs, e.size
}
