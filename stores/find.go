package stores

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// Finder is implemented by stores that look events up by ID or by key,
// whatever their state: the dashboard's search (package ui). It is not part
// of Store: a store without it still relays.
type Finder interface {
	// Find returns the record of p.ID, in any state, or the pending and
	// dead records of p.Key, oldest first (by the key's order), at most
	// p.Limit. A record not found is no error: the result is empty. A
	// search by ID reads the table's unique index; one by key, its pending
	// index and its dead records, never the published ones it keeps.
	Find(ctx context.Context, p FindParams) ([]Found, error)
}

// FindParams says what Find looks for: the record of ID when ID is not
// the zero UUID, otherwise the records of Key.
type FindParams struct {
	ID  uuid.UUID
	Key string
	// Limit bounds a search by key. Zero: 100.
	Limit int
}

// State is where a record stands in the outbox.
type State int

// The states of a record.
const (
	// StatePending: not yet published (due, scheduled or retrying).
	StatePending State = iota
	// StatePublished: published, kept for the retention window.
	StatePublished
	// StateDead: failed for good, or dead-lettered by hand.
	StateDead
)

// String is the state's name: "pending", "published" or "dead".
func (s State) String() string {
	switch s {
	case StatePending:
		return "pending"
	case StatePublished:
		return "published"
	case StateDead:
		return "dead"
	}
	return "unknown"
}

// Found is one record Find found, with its state. Its Payload is not read:
// Find is a status query.
type Found struct {
	Record
	State State
	// DueAt is when a pending record is due (its NotBefore, or its next
	// attempt after a failure); zero for the other states.
	DueAt time.Time
}
