package outbox

import "errors"

var (
	// ErrNoTransaction is returned by Enqueue when the transaction is nil,
	// already committed or rolled back. The outbox never autocommits: an
	// event written outside the business transaction is not atomic with it.
	ErrNoTransaction = errors.New("outbox: enqueue needs an open transaction")

	// ErrInvalidMessage is returned (wrapped, with the reason) for a message
	// that no store or broker could carry: an empty topic, an over-long key,
	// invalid UTF-8 in a header.
	ErrInvalidMessage = errors.New("outbox: invalid message")

	// ErrSchemaMissing is returned when the outbox table does not exist.
	// Run `outbox migrate` or call the store's Migrate.
	ErrSchemaMissing = errors.New("outbox: schema missing (run `outbox migrate`)")
)
