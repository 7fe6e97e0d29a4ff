package inbox

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidMessage is returned (wrapped, with the reason) for a message
	// the inbox cannot deduplicate: one without an ID. It is permanent.
	ErrInvalidMessage = errors.New("inbox: invalid message")

	// ErrSchemaMissing is returned when the inbox table does not exist. Call
	// the driver's Migrate (or the database object's), or apply the plain
	// SQL under the database package's migrations/.
	ErrSchemaMissing = errors.New("inbox: table missing (run the inbox driver's Migrate)")

	// ErrPermanent marks an error that no retry can cure. Subscribers
	// dead-letter such a message at once instead of redelivering it.
	ErrPermanent = errors.New("permanent failure")
)

// Permanent marks err as permanent: IsPermanent(Permanent(err)) is true and
// errors.Is(Permanent(err), err) still holds. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrPermanent, err)
}

// IsPermanent reports whether err, or an error it wraps, is permanent.
func IsPermanent(err error) bool {
	return errors.Is(err, ErrPermanent) || errors.Is(err, ErrInvalidMessage)
}
