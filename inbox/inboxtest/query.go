package inboxtest

import (
	"context"
	"database/sql"
	"testing"

	"github.com/outboxgo/outbox/inbox"
)

// Query runs q on db and returns its rows, each read by scan; it fails
// the test on error. A helper for harnesses over database/sql.
func Query[T any](t *testing.T, db *sql.DB, q string, scan func(*sql.Rows) (T, error)) []T {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// ScanString reads a row of one text column.
func ScanString(rows *sql.Rows) (string, error) {
	var s string
	err := rows.Scan(&s)
	return s, err
}

// ScanEffect reads a row of (id, note) into an Effect; id may be a uuid
// column, its text, or its 16 bytes.
func ScanEffect(rows *sql.Rows) (e Effect, err error) {
	err = rows.Scan(&e.ID, &e.Note)
	return e, err
}

// ScanRecord reads a row of (id, topic, received_at) into a Record, as
// ScanEffect reads the id; received_at is a time, returned in UTC.
func ScanRecord(rows *sql.Rows) (r inbox.Record, err error) {
	err = rows.Scan(&r.ID, &r.Topic, &r.ReceivedAt)
	r.ReceivedAt = r.ReceivedAt.UTC()
	return r, err
}
