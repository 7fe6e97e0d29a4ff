package pgcdc

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"
)

// column is one column of a tuple as pgoutput sends it: its kind
// (pglogrepl.TupleDataTypeText, Binary, Null or Toast) and, for text and
// binary columns, its bytes.
type column struct {
	kind byte
	data []byte
}

// parseInsert reads the body of a pgoutput Insert message (what follows
// its 'I', protocol version 1): the relation's ID, and the new tuple's
// columns, appended to cols[:0]. A column's bytes are a slice of src, not
// a copy: they are valid while src is, until the next receive, and decode
// copies what it keeps. pglogrepl.Parse, used for every other message,
// allocates each column of an insert and copies its bytes one at a time:
// a third of the stream's CPU per event.
func parseInsert(src []byte, cols []column) (uint32, []column, error) {
	cols = cols[:0]
	if len(src) < 7 {
		return 0, cols, fmt.Errorf("pgoutput insert: %d bytes, want 7 or more", len(src))
	}
	rel := binary.BigEndian.Uint32(src)
	if src[4] != 'N' {
		return 0, cols, fmt.Errorf("pgoutput insert: tuple type %q, want 'N'", src[4])
	}
	n := int(binary.BigEndian.Uint16(src[5:]))
	p := 7
	for i := range n {
		if p >= len(src) {
			return 0, cols, fmt.Errorf("pgoutput insert: column %d of %d past the message's end", i+1, n)
		}
		c := column{kind: src[p]}
		p++
		switch c.kind {
		case pglogrepl.TupleDataTypeText, pglogrepl.TupleDataTypeBinary:
			if len(src)-p < 4 {
				return 0, cols, fmt.Errorf("pgoutput insert: column %d: length past the message's end", i+1)
			}
			size := int(binary.BigEndian.Uint32(src[p:]))
			p += 4
			if size < 0 || size > len(src)-p {
				return 0, cols, fmt.Errorf("pgoutput insert: column %d: %d bytes past the message's end", i+1, size)
			}
			c.data = src[p : p+size : p+size]
			p += size
		case pglogrepl.TupleDataTypeNull, pglogrepl.TupleDataTypeToast:
		default:
			return 0, cols, fmt.Errorf("pgoutput insert: column %d: unknown kind %q", i+1, c.kind)
		}
		cols = append(cols, c)
	}
	if p != len(src) {
		return 0, cols, errors.New("pgoutput insert: bytes after the tuple")
	}
	return rel, cols, nil
}

// scan reads column i's data, in format, into dst, with a plan made at
// the column's first value in that format: pgtype.Map.Scan makes a plan
// at every call. A column is always scanned into the same type (see
// decode), so the plan's target type is not part of its key.
func (rel *relation) scan(typeMap *pgtype.Map, i int, format int16, data []byte, dst any) error {
	f := 0
	if format == pgtype.BinaryFormatCode {
		f = 1
	}
	plan := rel.plans[i][f]
	if plan == nil {
		plan = typeMap.PlanScan(rel.oid[i], format, dst)
		rel.plans[i][f] = plan
	}
	return plan.Scan(data, dst)
}
