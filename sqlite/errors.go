package sqlite

import (
	"errors"
	"fmt"
	"strings"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/sqlkit"
)

// isSchemaMissing reports whether err says a table does not exist. SQLite
// reports it as a plain SQLITE_ERROR, so the message is all there is; it is
// the same through every driver (modernc, mattn, ncruces).
func isSchemaMissing(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no such table")
}

// wrap names the operation and turns a missing outbox table into
// outbox.ErrSchemaMissing.
func wrap(op string, err error) error {
	return sqlkit.Wrap("sqlite", op, err, isSchemaMissing)
}

// wrapInbox names the inbox operation and turns a missing inbox table into
// inbox.ErrSchemaMissing.
func wrapInbox(op string, err error) error {
	if isSchemaMissing(err) {
		err = fmt.Errorf("%w: %w", inbox.ErrSchemaMissing, err)
	}
	return sqlkit.Wrap("sqlite", "inbox: "+op, err, nil)
}

// errClosedBatch is returned by Complete on a batch already ended.
var errClosedBatch = errors.New("sqlite: batch already completed or aborted")
