package mysql

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/outboxgo/outbox/internal/sqlkit"
)

// Values of the status column. Pending is the largest, so that it sorts last
// in the pending index (see schema/outbox/001_outbox.up.sql).
const (
	statusPublished = "1"
	statusDead      = "2"
	statusPending   = "3"
)

// Statement limits. MySQL takes at most 65535 placeholders per statement,
// and the server refuses a packet above max_allowed_packet (16 MiB by
// default on MariaDB, 64 MiB on MySQL): a statement carries at most
// maxStatementRows rows of its kind and, past its first row, about
// maxStatementBytes of values.
const (
	maxPlaceholders   = 65535
	maxStatementRows  = 10000
	maxStatementBytes = 4 << 20
)

// maxErrorLen is what last_error (TEXT) holds, in bytes.
const maxErrorLen = 65535

// chunks calls f with consecutive runs [lo, hi) of n items: each run has at
// most maxRows items and, past its first, at most maxBytes of size(i).
func chunks(n, maxRows int, size func(i int) int, f func(lo, hi int) error) error {
	for lo := 0; lo < n; {
		hi, total := lo, 0
		for hi < n && hi-lo < maxRows {
			s := size(hi)
			if hi > lo && total+s > maxStatementBytes {
				break
			}
			total += s
			hi++
		}
		if err := f(lo, hi); err != nil {
			return err
		}
		lo = hi
	}
	return nil
}

// Statements that name rows (the ids of an outcome, a replay, a purge) take
// them as one JSON array parameter (sqlkit.IDsJSON), turned into rows by JSON_TABLE (MySQL
// 8.0.4+, MariaDB 10.6+) and joined to the table's unique index:
//
//	JSON_TABLE(?, …) AS f STRAIGHT_JOIN t FORCE INDEX (id) ON t.id = UNHEX(f.id)
//
// That is one short statement to parse however many rows it names, with no
// placeholder limit, and a plan that cannot change: each row is looked up
// by its key, and a statement locks the rows it names and no other. A plain
// "WHERE id IN (…)" is not safe here: on a small table, or past 1,000 values
// on MariaDB (in_predicate_conversion_threshold), the optimizer scans the
// whole table instead, and a locking scan waits for every claimed row in
// its way, then deadlocks with the claims.

// seqsJSON returns seqs as a JSON array of numbers, for Purge.
func seqsJSON(seqs []uint64) string {
	b := make([]byte, 0, 2+len(seqs)*8)
	b = append(b, '[')
	for i, s := range seqs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, s, 10)
	}
	return string(append(b, ']'))
}

// datetimeLayout is how DATETIME(6) values go in and come out as text.
const datetimeLayout = "2006-01-02 15:04:05.000000"

// dbTime is t as the columns store it: UTC, truncated to the microsecond,
// as text. The store passes times as text and reads them back as text (see
// recordCols) so that they are UTC whatever the DSN's loc and parseTime say:
// the write side runs on the application's connections, with the
// application's DSN. Truncating here, not in the server, makes MySQL (which
// rounds) and MariaDB (which truncates) store the same value.
func dbTime(t time.Time) string { return t.UTC().Format(datetimeLayout) }

// errText makes a failure's error storable: valid UTF-8 (the server rejects
// anything else) and no longer than the column.
func errText(s string) string { return storable(s, maxErrorLen) }

// storable is s as valid UTF-8 (bad bytes replaced by U+FFFD), cut to at
// most n bytes on a character boundary.
func storable(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// utcTime scans a DATETIME selected as text (CAST(… AS CHAR)) into a UTC
// time.Time; NULL gives the zero time.
type utcTime struct{ t *time.Time }

func (u utcTime) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		*u.t = time.Time{}
	case []byte:
		return u.parse(string(v))
	case string:
		return u.parse(v)
	default:
		return fmt.Errorf("mysql: cannot scan %T into a time", v)
	}
	return nil
}

func (u utcTime) parse(s string) error {
	// Parsing takes any fraction of a second after the seconds.
	t, err := time.ParseInLocation(time.DateTime, s, time.UTC)
	if err != nil {
		return fmt.Errorf("mysql: %w", err)
	}
	*u.t = t
	return nil
}

// Server error numbers.
const (
	erNoSuchTable     = 1146 // ER_NO_SUCH_TABLE
	erLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT: a table's metadata lock or a row lock
)

// isSchemaMissing reports whether err says a table does not exist.
func isSchemaMissing(err error) bool {
	var myErr *mysql.MySQLError
	return errors.As(err, &myErr) && myErr.Number == erNoSuchTable
}

// isLockWaitTimeout reports whether err says a lock was waited for longer
// than the session allows (lock_wait_timeout, innodb_lock_wait_timeout).
func isLockWaitTimeout(err error) bool {
	var myErr *mysql.MySQLError
	return errors.As(err, &myErr) && myErr.Number == erLockWaitTimeout
}

// wrap names the operation and turns a missing table into
// outbox.ErrSchemaMissing.
func wrap(op string, err error) error {
	return sqlkit.Wrap("mysql", op, err, isSchemaMissing)
}
