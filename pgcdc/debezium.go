package pgcdc

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/outboxgo/outbox"
)

// DebeziumTable reads a Debezium-style outbox table (the one Debezium's
// outbox event router reads) instead of this project's: each insert
// becomes a message routed by its aggregate type. Every column name has
// Debezium's default.
//
// Such a table has no status and no not-before time: the relay writes
// nothing to it (applications usually insert and delete at once, as
// Debezium advises), events are never delayed, and a dead event is written
// to this project's outbox table (Config.Schema and Config.Table, made by
// `outbox migrate`), where `outbox dead` lists it and `outbox dead retry`
// sends it again.
type DebeziumTable struct {
	// Schema and Table name the table. Default "public" and "outbox".
	Schema, Table string
	// ID is the event id column (uuid, or text: a value that is no UUID
	// becomes a name-based UUID, the same every time). Default "id".
	ID string
	// AggregateType is the column routed on: the message's topic (see
	// Route). Default "aggregatetype".
	AggregateType string
	// AggregateID is the ordering key column. Default "aggregateid".
	AggregateID string
	// Type is the event type column. Default "type".
	Type string
	// Payload is the payload column: jsonb, json, text or bytea. Default
	// "payload".
	Payload string
	// Timestamp is an optional timestamptz column for CreatedAt. Default
	// "": the transaction's commit time.
	Timestamp string
	// Route maps an aggregate type to the topic. Default: the aggregate
	// type itself (Debezium's router makes it outbox.event.<type>: give
	// func(t string) string { return "outbox.event." + t } for that).
	Route func(aggregateType string) string
}

// debeziumNS is the namespace of the UUIDs made from ids that are none.
var debeziumNS = uuid.MustParse("6f1d7c58-61c4-4d55-a7a9-1d3e1f0b0c5e")

func (d *DebeziumTable) withDefaults() DebeziumTable {
	out := *d
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&out.Schema, "public")
	def(&out.Table, "outbox")
	def(&out.ID, "id")
	def(&out.AggregateType, "aggregatetype")
	def(&out.AggregateID, "aggregateid")
	def(&out.Type, "type")
	def(&out.Payload, "payload")
	if out.Route == nil {
		out.Route = func(t string) string { return t }
	}
	return out
}

// decodeDebezium turns an insert of a Debezium table into a row.
func (rel *relation) decodeDebezium(d *DebeziumTable, t []column, commit time.Time, typeMap *pgtype.Map) (*row, error) {
	text := func(name string) (string, uint32, bool) {
		i, ok := rel.col[name]
		if !ok || i >= len(t) || t[i].kind != pglogrepl.TupleDataTypeText {
			return "", 0, false
		}
		return string(t[i].data), rel.oid[i], true
	}
	idText, _, ok := text(d.ID)
	if !ok {
		return nil, fmt.Errorf("debezium outbox insert without a %s column value", d.ID)
	}
	id, err := uuid.Parse(idText)
	if err != nil {
		id = uuid.NewSHA1(debeziumNS, []byte(idText))
	}
	r := &row{msg: outbox.Message{ID: id, CreatedAt: commit}}
	var bad []error
	agg, _, _ := text(d.AggregateType)
	r.msg.Topic = d.Route(agg)
	r.msg.Key, _, _ = text(d.AggregateID)
	r.msg.Type, _, _ = text(d.Type)
	if s, oid, ok := text(d.Payload); ok {
		if oid == pgtype.ByteaOID {
			var b []byte
			if err := typeMap.Scan(pgtype.ByteaOID, pgtype.TextFormatCode, []byte(s), &b); err != nil {
				bad = append(bad, fmt.Errorf("payload: %w", err))
			}
			r.msg.Payload = b
		} else {
			r.msg.Payload = []byte(s)
		}
	}
	if r.msg.Payload == nil {
		r.msg.Payload = []byte{}
	}
	if d.Timestamp != "" {
		if s, _, ok := text(d.Timestamp); ok {
			var tm time.Time
			if err := typeMap.Scan(pgtype.TimestamptzOID, pgtype.TextFormatCode, []byte(s), &tm); err != nil {
				bad = append(bad, fmt.Errorf("%s: %w", d.Timestamp, err))
			}
			r.msg.CreatedAt = tm
		}
	}
	if r.msg.Topic == "" {
		bad = append(bad, fmt.Errorf("empty %s: no topic to route to", d.AggregateType))
	}
	if len(bad) > 0 {
		r.badErr = fmt.Errorf("pgcdc: undecodable debezium outbox row: %w", errors.Join(bad...))
	}
	return r, nil
}
