package sqlkit

import (
	"encoding/hex"
	"fmt"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
)

// IDsJSON returns ids as a JSON array of their 32 hex digits, for a
// statement that joins against JSON_TABLE or json_each: one parameter, any
// number of IDs, and an index lookup per ID (an IN list of thousands is
// not one on every database).
func IDsJSON(ids []uuid.UUID) string {
	b := make([]byte, 0, 2+len(ids)*35)
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = hex.AppendEncode(b, id[:])
		b = append(b, '"')
	}
	return string(append(b, ']'))
}

// Wrap names the backend and the operation in err, and marks it
// outbox.ErrSchemaMissing when missing says the table does not exist.
func Wrap(backend, op string, err error, missing func(error) bool) error {
	if missing != nil && missing(err) {
		return fmt.Errorf("%s: %s: %w: %w", backend, op, outbox.ErrSchemaMissing, err)
	}
	return fmt.Errorf("%s: %s: %w", backend, op, err)
}
