package faulttest

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/publishers"
)

func rabbitRelayPublisher(*slog.Logger) (publishers.Publisher, error) {
	return nil, errors.New("not yet")
}

func rabbitSubscribe(context.Context, *inbox.Inbox[*sql.Tx], inbox.Handler[*sql.Tx]) error {
	return errors.New("not yet")
}
