package pgcdc

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/outboxgo/outbox"
)

// heldMarker is the last_error the relay writes on a delayed event's row it
// writes back in InsertDelete mode: the stream skips such an insert.
const heldMarker = "pgcdc: held until due (insert-delete mode)"

// relation maps a relation's columns to the outbox's.
type relation struct {
	outbox bool
	col    map[string]int
	oid    []uint32 // each column's type
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
// a pgtype.Map is not safe for concurrent use). An error means the row has no
// usable id; other defects set badErr.
func (rel *relation) decode(t *pglogrepl.TupleData, typeMap *pgtype.Map) (*row, error) {
	if t == nil {
		return nil, errors.New("insert without a tuple")
	}
	text := func(name string) (string, bool) {
		i, ok := rel.col[name]
		if !ok || i >= len(t.Columns) || t.Columns[i].DataType != pglogrepl.TupleDataTypeText {
			return "", false
		}
		return string(t.Columns[i].Data), true
	}
	idText, ok := text("id")
	if !ok {
		return nil, errors.New("outbox insert without an id column")
	}
	id, err := uuid.Parse(idText)
	if err != nil {
		return nil, fmt.Errorf("outbox insert: id %q: %w", idText, err)
	}
	r := &row{msg: outbox.Message{ID: id}}
	var bad []error
	r.msg.Topic, _ = text("topic")
	r.msg.Key, _ = text("key")
	r.msg.Type, _ = text("type")
	if s, ok := text("status"); ok {
		r.status, _ = strconv.Atoi(s)
	}
	if s, ok := text("last_error"); ok && s == heldMarker {
		r.held = true
	}
	if s, ok := text("payload"); ok {
		var b []byte
		if err := typeMap.Scan(pgtype.ByteaOID, pgtype.TextFormatCode, []byte(s), &b); err != nil {
			bad = append(bad, fmt.Errorf("payload: %w", err))
		}
		r.msg.Payload = b
	}
	if r.msg.Payload == nil {
		r.msg.Payload = []byte{}
	}
	if s, ok := text("headers"); ok && s != "" {
		if err := json.Unmarshal([]byte(s), &r.msg.Headers); err != nil {
			bad = append(bad, fmt.Errorf("headers are not a JSON object of strings: %w", err))
		}
	}
	ts := func(name string) time.Time {
		s, ok := text(name)
		if !ok {
			return time.Time{}
		}
		var tm time.Time
		if err := typeMap.Scan(pgtype.TimestamptzOID, pgtype.TextFormatCode, []byte(s), &tm); err != nil {
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
