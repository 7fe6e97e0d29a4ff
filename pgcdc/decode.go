package pgcdc

import (
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/headerjson"
)

// heldMarker is the last_error the relay writes on a delayed event's row it
// writes back in InsertDelete mode: the stream skips such an insert.
const heldMarker = "pgcdc: held until due (insert-delete mode)"

// relation maps a relation's columns to the outbox's.
type relation struct {
	outbox bool
	col    map[string]int
	oid    []uint32 // each column's type
	at     outboxColumns
	plans  [][2]pgtype.ScanPlan // each column's scan plans, text and binary, made at first use
}

// outboxColumns holds the positions of the outbox table's columns in a
// relation, -1 for one it does not have: decode finds each column of an
// insert by its position, not by its name.
type outboxColumns struct {
	id, topic, key, typ, payload, headers, createdAt, availableAt, status, lastError int
}

func newRelation(m *pglogrepl.RelationMessage, schema, table string) *relation {
	rel := &relation{outbox: m.Namespace == schema && m.RelationName == table, col: map[string]int{}}
	for i, c := range m.Columns {
		rel.col[c.Name] = i
		rel.oid = append(rel.oid, c.DataType)
	}
	rel.plans = make([][2]pgtype.ScanPlan, len(m.Columns))
	at := func(name string) int {
		if i, ok := rel.col[name]; ok {
			return i
		}
		return -1
	}
	rel.at = outboxColumns{id: at("id"), topic: at("topic"), key: at("key"), typ: at("type"), payload: at("payload"),
		headers: at("headers"), createdAt: at("created_at"), availableAt: at("available_at"), status: at("status"),
		lastError: at("last_error")}
	return rel
}

// row is a decoded outbox insert.
type row struct {
	msg    outbox.Message
	status int16
	held   bool  // written back by the relay (heldMarker)
	badErr error // the row cannot become a message
}

// decode turns an insert's tuple into a row (typeMap is the stream's own:
// a pgtype.Map is not safe for concurrent use). Columns come in text
// format, or in binary when the stream asked for it (Relay.binary); each
// is read by its type's codec in the format it came in, straight into the
// row's fields. The columns' bytes are the received message's: what the
// row keeps is copied. An error means the row has no usable id; other
// defects set badErr.
func (rel *relation) decode(t []column, typeMap *pgtype.Map) (*row, error) {
	// value returns column i's data and format.
	value := func(i int) (data []byte, format int16, ok bool) {
		if i < 0 || i >= len(t) {
			return nil, 0, false
		}
		switch c := t[i]; c.kind {
		case pglogrepl.TupleDataTypeText:
			return c.data, pgtype.TextFormatCode, true
		case pglogrepl.TupleDataTypeBinary:
			return c.data, pgtype.BinaryFormatCode, true
		}
		return nil, 0, false // null, or unchanged TOAST
	}
	// text reads a text column: its bytes in either format.
	text := func(i int) (string, bool) {
		data, _, ok := value(i)
		return string(data), ok
	}
	scan := func(i int, dst any) (bool, error) {
		data, format, ok := value(i)
		if !ok {
			return false, nil
		}
		return true, rel.scan(typeMap, i, format, data, dst)
	}
	at := &rel.at
	r := &row{}
	// Into the ID's bytes: a *uuid.UUID is a sql.Scanner, which pgx feeds
	// the UUID formatted as text for it to parse back.
	if ok, err := scan(at.id, (*[16]byte)(&r.msg.ID)); !ok {
		return nil, errors.New("outbox insert without an id column")
	} else if err != nil {
		idText, _ := text(at.id)
		return nil, fmt.Errorf("outbox insert: id %q: %w", idText, err)
	}
	var bad []error
	r.msg.Topic, _ = text(at.topic)
	r.msg.Key, _ = text(at.key)
	r.msg.Type, _ = text(at.typ)
	if ok, err := scan(at.status, &r.status); ok && err != nil {
		r.status = 0
	}
	if s, ok := text(at.lastError); ok && s == heldMarker {
		r.held = true
	}
	if _, err := scan(at.payload, &r.msg.Payload); err != nil {
		bad = append(bad, fmt.Errorf("payload: %w", err))
	}
	if r.msg.Payload == nil {
		r.msg.Payload = []byte{}
	}
	var headers []byte
	if _, err := scan(at.headers, &headers); err != nil {
		bad = append(bad, fmt.Errorf("headers: %w", err))
	} else if len(headers) > 0 {
		if err := headerjson.Unmarshal(headers, &r.msg.Headers); err != nil {
			bad = append(bad, fmt.Errorf("headers are not a JSON object of strings: %w", err))
		}
	}
	if _, err := scan(at.createdAt, &r.msg.CreatedAt); err != nil {
		bad = append(bad, fmt.Errorf("created_at: %w", err))
	}
	// available_at, kept as the not-before time only when past the
	// creation.
	if _, err := scan(at.availableAt, &r.msg.NotBefore); err != nil {
		bad = append(bad, fmt.Errorf("available_at: %w", err))
	}
	if !r.msg.NotBefore.After(r.msg.CreatedAt) {
		r.msg.NotBefore = time.Time{}
	}
	if r.msg.Topic == "" {
		bad = append(bad, errors.New("empty topic"))
	}
	if len(bad) > 0 {
		r.badErr = fmt.Errorf("pgcdc: undecodable outbox row: %w", errors.Join(bad...))
	}
	return r, nil
}
