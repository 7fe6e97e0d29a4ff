package faulttest

import (
	"context"
	"database/sql"
	"errors"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/stores"
)

func mariaRelayStore(context.Context) (stores.Store, error) { return nil, errors.New("not yet") }

func mariaInbox(context.Context) (*inbox.Inbox[*sql.Tx], inbox.Handler[*sql.Tx], error) {
	return nil, nil, errors.New("not yet")
}
