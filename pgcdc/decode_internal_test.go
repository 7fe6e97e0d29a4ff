package pgcdc

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/outboxgo/outbox"
)

// outboxInsert is the relation message and an insert's columns of the
// outbox table as pgoutput sends them with binary 'true': an event of
// key, with a 200-byte payload and one header.
func outboxInsert(key string) (*pglogrepl.RelationMessage, []column) {
	ts := func(t time.Time) []byte {
		us := t.Sub(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).Microseconds()
		return binary.BigEndian.AppendUint64(nil, uint64(us))
	}
	now := time.Now()
	id := outbox.NewID()
	cols := []struct {
		name string
		oid  uint32
		data []byte // nil: NULL
	}{
		{"seq", pgtype.Int8OID, binary.BigEndian.AppendUint64(nil, 42)},
		{"id", pgtype.UUIDOID, id[:]},
		{"topic", pgtype.TextOID, []byte("orders")},
		{"key", pgtype.TextOID, []byte(key)},
		{"type", pgtype.TextOID, []byte("OrderConfirmed")},
		{"payload", pgtype.ByteaOID, make([]byte, 200)},
		{"headers", pgtype.JSONBOID, append([]byte{1}, `{"trace": "abc"}`...)},
		{"created_at", pgtype.TimestamptzOID, ts(now)},
		{"available_at", pgtype.TimestamptzOID, ts(now)},
		{"status", pgtype.Int2OID, []byte{0, 0}},
		{"attempts", pgtype.Int4OID, []byte{0, 0, 0, 0}},
		{"last_error", pgtype.TextOID, nil},
		{"published_at", pgtype.TimestamptzOID, nil},
	}
	rel := &pglogrepl.RelationMessage{RelationID: 16384, Namespace: "outbox", RelationName: "messages"}
	var tuple []column
	for _, c := range cols {
		rel.Columns = append(rel.Columns, &pglogrepl.RelationMessageColumn{Name: c.name, DataType: c.oid})
		if c.data == nil {
			tuple = append(tuple, column{kind: pglogrepl.TupleDataTypeNull})
		} else {
			tuple = append(tuple, column{kind: pglogrepl.TupleDataTypeBinary, data: c.data})
		}
	}
	return rel, tuple
}

// TestDecode: an outbox insert decodes to the event it carries, with
// its columns in binary (PostgreSQL 14 and later) and in text (earlier
// servers), and a second insert of the relation decodes with the plans
// the first one made.
func TestDecode(t *testing.T) {
	m, tuple := outboxInsert("order-42")
	id := [16]byte(tuple[1].data)
	created := time.Date(2026, 12, 6, 13, 0, 0, 123456000, time.UTC)
	text := func(s string) column { return column{kind: pglogrepl.TupleDataTypeText, data: []byte(s)} }
	asText := []column{text("42"), text(uuid.UUID(id).String()), text("orders"), text("order-42"), text("OrderConfirmed"),
		text(`\x` + strings.Repeat("00", 200)), text(`{"trace": "abc"}`), text("2026-12-06 13:00:00.123456+00"),
		text("2026-12-06 13:00:00.123456+00"), text("0"), text("0"), {kind: pglogrepl.TupleDataTypeNull},
		{kind: pglogrepl.TupleDataTypeNull}}
	for name, tuple := range map[string][]column{"binary": tuple, "text": asText} {
		rel := newRelation(m, "outbox", "messages")
		types := pgtype.NewMap()
		for range 2 {
			r, err := rel.decode(tuple, types)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if r.badErr != nil {
				t.Fatalf("%s: %v", name, r.badErr)
			}
			got := r.msg
			if [16]byte(got.ID) != id || got.Topic != "orders" || got.Key != "order-42" || got.Type != "OrderConfirmed" ||
				!bytes.Equal(got.Payload, make([]byte, 200)) || got.Headers["trace"] != "abc" || len(got.Headers) != 1 ||
				got.CreatedAt.IsZero() || !got.NotBefore.IsZero() || r.status != 0 || r.held {
				t.Fatalf("%s: decoded %+v (status %d, held %v)", name, got, r.status, r.held)
			}
			if name == "text" && !got.CreatedAt.Equal(created) {
				t.Fatalf("text: created at %v, want %v", got.CreatedAt, created)
			}
		}
	}
}

// BenchmarkDecode is the stream's decoding of one outbox insert, what
// every event costs the CDC relay before it is published.
//
//	go test -run '^$' -bench Decode -benchmem ./pgcdc
func BenchmarkDecode(b *testing.B) {
	m, tuple := outboxInsert("order-42")
	rel := newRelation(m, "outbox", "messages")
	types := pgtype.NewMap()
	body := insertBody(m.RelationID, tuple)
	var cols []column
	for b.Loop() {
		var err error
		_, cols, err = parseInsert(body, cols)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := rel.decode(cols, types); err != nil {
			b.Fatal(err)
		}
	}
}
