package sqlite

import (
	"errors"
	"fmt"
	"strings"

	"github.com/outboxgo/outbox"
)

// isSchemaMissing reports whether err says the outbox table does not exist.
// SQLite reports it as a plain SQLITE_ERROR, so the message is all there is;
// it is the same through every driver (modernc, mattn, ncruces).
func isSchemaMissing(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no such table")
}

// wrap names the operation and turns a missing table into ErrSchemaMissing.
func wrap(op string, err error) error {
	if isSchemaMissing(err) {
		return fmt.Errorf("sqlite: %s: %w: %w", op, outbox.ErrSchemaMissing, err)
	}
	return fmt.Errorf("sqlite: %s: %w", op, err)
}

// errClosedBatch is returned by Complete on a batch already ended.
var errClosedBatch = errors.New("sqlite: batch already completed or aborted")
