package pgcdc

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
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
	plans  map[scanKey]pgtype.ScanPlan
}

func newRelation(m *pglogrepl.RelationMessage, schema, table string) *relation {
	rel := &relation{outbox: m.Namespace == schema && m.RelationName == table, col: map[string]int{}}
	for i, c := range m.Columns {
		rel.col[c.Name] = i
		rel.oid = append(rel.oid, c.DataType)
	}
	return rel
}

// row is a decoded outbox insert.
type row struct {
	msg    outbox.Message
	status int
	held   bool  // written back by the relay (heldMarker)
	badErr error // the row cannot become a message
}

// decode turns an insert's tuple into a row (typeMap is the stream's own:
// a pgtype.Map is not safe for concurrent use). Columns come in text
// format, or in binary when the stream asked for it (Relay.binary); each
// is read by its type's codec in the format it came in. The columns' bytes
// are the received message's: what the row keeps is copied. An error means the
// row has no usable id; other defects set badErr.
func (rel *relation) decode(t []column, typeMap *pgtype.Map) (*row, error) {
	// value returns a column's index, data and format.
	value := func(name string) (i int, data []byte, format int16, ok bool) {
		i, found := rel.col[name]
		if !found || i >= len(t) {
			return 0, nil, 0, false
		}
		switch c := t[i]; c.kind {
		case pglogrepl.TupleDataTypeText:
			return i, c.data, pgtype.TextFormatCode, true
		case pglogrepl.TupleDataTypeBinary:
			return i, c.data, pgtype.BinaryFormatCode, true
		}
		return 0, nil, 0, false // null, or unchanged TOAST
	}
	// text reads a text column: its bytes in either format.
	text := func(name string) (string, bool) {
		_, data, _, ok := value(name)
		return string(data), ok
	}
	scan := func(name string, dst any) (bool, error) {
		i, data, format, ok := value(name)
		if !ok {
			return false, nil
		}
		return true, rel.scan(typeMap, i, format, data, dst)
	}
	var id uuid.UUID
	if ok, err := scan("id", &id); !ok {
		return nil, errors.New("outbox insert without an id column")
	} else if err != nil {
		idText, _ := text("id")
		return nil, fmt.Errorf("outbox insert: id %q: %w", idText, err)
	}
	r := &row{msg: outbox.Message{ID: id}}
	var bad []error
	r.msg.Topic, _ = text("topic")
	r.msg.Key, _ = text("key")
	r.msg.Type, _ = text("type")
	var status int16
	if ok, err := scan("status", &status); ok && err == nil {
		r.status = int(status)
	}
	if s, ok := text("last_error"); ok && s == heldMarker {
		r.held = true
	}
	if _, err := scan("payload", &r.msg.Payload); err != nil {
		bad = append(bad, fmt.Errorf("payload: %w", err))
	}
	if r.msg.Payload == nil {
		r.msg.Payload = []byte{}
	}
	var headers []byte
	if _, err := scan("headers", &headers); err != nil {
		bad = append(bad, fmt.Errorf("headers: %w", err))
	} else if len(headers) > 0 {
		if err := headerjson.Unmarshal(headers, &r.msg.Headers); err != nil {
			bad = append(bad, fmt.Errorf("headers are not a JSON object of strings: %w", err))
		}
	}
	ts := func(name string) time.Time {
		var tm time.Time
		if _, err := scan(name, &tm); err != nil {
			bad = append(bad, fmt.Errorf("%s: %w", name, err))
		}
		return tm
	}
	r.msg.CreatedAt = ts("created_at")
	if av := ts("available_at"); av.After(r.msg.CreatedAt) {
		r.msg.NotBefore = av
	}
	if r.msg.Topic == "" {
		bad = append(bad, errors.New("empty topic"))
	}
	if len(bad) > 0 {
		r.badErr = fmt.Errorf("pgcdc: undecodable outbox row: %w", errors.Join(bad...))
	}
	return r, nil
}
