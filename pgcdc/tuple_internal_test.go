package pgcdc

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/jackc/pglogrepl"
)

// insertBody is an Insert message's body (after its 'I') for relation rel
// and cols.
func insertBody(rel uint32, cols []column) []byte {
	b := binary.BigEndian.AppendUint32(nil, rel)
	b = append(b, 'N')
	b = binary.BigEndian.AppendUint16(b, uint16(len(cols)))
	for _, c := range cols {
		b = append(b, c.kind)
		if c.kind == pglogrepl.TupleDataTypeText || c.kind == pglogrepl.TupleDataTypeBinary {
			b = binary.BigEndian.AppendUint32(b, uint32(len(c.data)))
			b = append(b, c.data...)
		}
	}
	return b
}

// parseInsert reads what pglogrepl.Parse reads, and refuses what is cut
// short or malformed instead of panicking.
func TestParseInsert(t *testing.T) {
	cols := []column{
		{kind: pglogrepl.TupleDataTypeBinary, data: []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}},
		{kind: pglogrepl.TupleDataTypeText, data: []byte("orders")},
		{kind: pglogrepl.TupleDataTypeText, data: []byte{}},
		{kind: pglogrepl.TupleDataTypeNull},
		{kind: pglogrepl.TupleDataTypeToast},
		{kind: pglogrepl.TupleDataTypeBinary, data: bytes.Repeat([]byte{0xff}, 300)},
	}
	body := insertBody(16384, cols)
	m, err := pglogrepl.Parse(append([]byte{'I'}, body...))
	if err != nil {
		t.Fatal(err)
	}
	want := m.(*pglogrepl.InsertMessage)
	rel, got, err := parseInsert(body, make([]column, 3))
	if err != nil {
		t.Fatal(err)
	}
	if rel != want.RelationID || len(got) != len(want.Tuple.Columns) {
		t.Fatalf("relation %d with %d columns, pglogrepl reads %d with %d", rel, len(got), want.RelationID, len(want.Tuple.Columns))
	}
	for i, c := range got {
		w := want.Tuple.Columns[i]
		if c.kind != w.DataType || !bytes.Equal(c.data, w.Data) {
			t.Errorf("column %d: %q %x, pglogrepl reads %q %x", i, c.kind, c.data, w.DataType, w.Data)
		}
	}
	for n := range len(body) {
		if _, _, err := parseInsert(body[:n], nil); err == nil {
			t.Errorf("the first %d of %d bytes parsed without an error", n, len(body))
		}
	}
	for name, b := range map[string][]byte{
		"bytes after the tuple": append(append([]byte(nil), body...), 0),
		"tuple type K":          append(append([]byte(nil), body[:4]...), append([]byte{'K'}, body[5:]...)...),
		"unknown column kind":   insertBody(1, []column{{kind: 'x'}}),
		"length past the end":   {0, 0, 0, 1, 'N', 0, 1, 't', 0x7f, 0xff, 0xff, 0xff, 'a'},
		"negative length":       {0, 0, 0, 1, 'N', 0, 1, 'b', 0xff, 0xff, 0xff, 0xfe, 'a'},
	} {
		if _, _, err := parseInsert(b, nil); err == nil {
			t.Errorf("%s: parsed without an error", name)
		}
	}
}

// FuzzParseInsert: no input makes parseInsert panic, and what it parses
// is what pglogrepl reads.
func FuzzParseInsert(f *testing.F) {
	f.Add(insertBody(7, []column{{kind: 't', data: []byte("x")}, {kind: 'n'}, {kind: 'b', data: []byte{0}}}))
	f.Add([]byte{0, 0, 0, 1, 'N', 0, 0})
	f.Fuzz(func(t *testing.T, body []byte) {
		rel, cols, err := parseInsert(body, nil)
		if err != nil {
			return
		}
		m, perr := pglogrepl.Parse(append([]byte{'I'}, body...))
		if perr != nil && len(cols) == 0 {
			return // pglogrepl wants 8 bytes or more: a column at least
		}
		if perr != nil {
			t.Fatalf("parsed, and pglogrepl refuses it: %v", perr)
		}
		want := m.(*pglogrepl.InsertMessage)
		if rel != want.RelationID || len(cols) != len(want.Tuple.Columns) {
			t.Fatalf("relation %d with %d columns, pglogrepl reads %d with %d", rel, len(cols), want.RelationID, len(want.Tuple.Columns))
		}
		for i, c := range cols {
			if w := want.Tuple.Columns[i]; c.kind != w.DataType || !bytes.Equal(c.data, w.Data) {
				t.Fatalf("column %d differs from pglogrepl's", i)
			}
		}
	})
}
