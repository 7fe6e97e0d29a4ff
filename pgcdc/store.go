package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/headerjson"
)

// setup creates the publication and the slot when they do not exist, and
// refuses a slot that cannot serve.
func (r *Relay) setup(ctx context.Context) error {
	if !r.indexChecked {
		// Once a relay: a table migrated before 004_delayed works, but
		// each due sweep reads all of it.
		var ok bool
		err := r.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_indexes WHERE schemaname = $1 AND indexname = $2)`,
			r.cfg.Schema, r.cfg.Table+"_delayed").Scan(&ok)
		r.indexChecked = err == nil
		if err == nil && !ok {
			r.log.Warn("the outbox table has no index of delayed events (its migration 004_delayed is not applied): "+
				"every due sweep reads the whole table; run outbox migrate", "table", r.table, "sweep_every", r.cfg.PollInterval)
		}
	}
	var n int
	err := r.pool.QueryRow(ctx, `SELECT count(*) FROM pg_publication WHERE pubname = $1`, r.cfg.Publication).Scan(&n)
	if err != nil {
		return fmt.Errorf("look up the publication: %w", err)
	}
	if n == 0 {
		_, err := r.pool.Exec(ctx, `CREATE PUBLICATION `+pgx.Identifier{r.cfg.Publication}.Sanitize()+
			` FOR TABLE `+r.source+` WITH (publish = 'insert')`)
		if err != nil && !isCode(err, "42710") {
			return fmt.Errorf("create the publication %s: %w", r.cfg.Publication, err)
		}
		if err == nil {
			r.log.Info("publication created", "publication", r.cfg.Publication, "table", r.source)
		}
	}
	var plugin, walStatus string
	err = r.pool.QueryRow(ctx, `SELECT coalesce(plugin, ''), coalesce(wal_status, '') FROM pg_replication_slots WHERE slot_name = $1`,
		r.cfg.Slot).Scan(&plugin, &walStatus)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		_, err := r.pool.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, r.cfg.Slot)
		if err != nil && !isCode(err, "42710") {
			return fmt.Errorf("create the replication slot %s (the role needs the REPLICATION attribute): %w", r.cfg.Slot, err)
		}
		if err == nil && r.cfg.Debezium == nil {
			var pending int64
			_ = r.pool.QueryRow(ctx, `SELECT count(*) FROM `+r.table+` WHERE status = 0`).Scan(&pending)
			r.log.Info("replication slot created: events committed from now on are streamed", "slot", r.cfg.Slot)
			if pending > 0 {
				r.log.Warn("pending events older than the new slot are not in its stream; drain them once with the polling relay",
					"pending", pending)
			}
		}
		return nil
	case err != nil:
		return fmt.Errorf("look up the replication slot: %w", err)
	case plugin != "pgoutput":
		return fmt.Errorf("replication slot %s uses plugin %q, not pgoutput: pick another Slot", r.cfg.Slot, plugin)
	case walStatus == "lost":
		return fmt.Errorf("%w: slot %s", ErrSlotLost, r.cfg.Slot)
	}
	return nil
}

// slotPosition reads the slot's confirmed position.
func (r *Relay) slotPosition(ctx context.Context) (pglogrepl.LSN, error) {
	var s string
	err := r.pool.QueryRow(ctx, `SELECT coalesce(confirmed_flush_lsn::text, '0/0') FROM pg_replication_slots WHERE slot_name = $1`,
		r.cfg.Slot).Scan(&s)
	if err != nil {
		return 0, fmt.Errorf("read the slot's position: %w", err)
	}
	return pglogrepl.ParseLSN(s)
}

func isCode(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}

// marker marks (deletes, or marks published) the rows of acknowledged
// events in batches, then retires the events.
func (r *Relay) marker(ctx context.Context) {
	e := r.eng
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.markWake:
		}
		// Let a batch gather.
		t := time.NewTimer(r.cfg.MarkInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		for {
			e.mu.Lock()
			n := min(len(e.marks), 10000)
			evs := append([]*event(nil), e.marks[:n]...)
			e.marks = e.marks[n:]
			e.mu.Unlock()
			if n == 0 {
				break
			}
			err := r.retryStore(ctx, "mark published events", func(ctx context.Context) error { return r.markRows(ctx, evs) })
			if err != nil {
				return
			}
			e.mu.Lock()
			for _, ev := range evs {
				e.done(ev)
			}
			e.mu.Unlock()
		}
	}
}

// markRows deletes (or marks published) the rows of evs. The log may
// deliver a transaction a moment before it is visible to other sessions
// (the commit is flushed before it leaves the server's running list, and a
// synchronous standby's ack comes in between): rows not found are marked
// again once their transaction is visible, and only then taken as gone
// (an event sent again after a crash, whose row was marked before).
func (r *Relay) markRows(ctx context.Context, evs []*event) error {
	ids := make([]uuid.UUID, len(evs))
	for i, ev := range evs {
		ids[i] = ev.msg.ID
	}
	for {
		var rows pgx.Rows
		var err error
		if r.cfg.Retention > 0 {
			rows, err = r.pool.Query(ctx, `UPDATE `+r.table+` SET status = 1, published_at = $2 WHERE id = ANY($1) AND status = 0 RETURNING id`,
				pgIDs(ids), r.cfg.Clock.Now().UTC())
		} else {
			rows, err = r.pool.Query(ctx, `DELETE FROM `+r.table+` WHERE id = ANY($1) AND status = 0 RETURNING id`, pgIDs(ids))
		}
		if err != nil {
			return err
		}
		marked, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return err
		}
		if len(marked) == len(ids) {
			return nil
		}
		done := make(map[uuid.UUID]bool, len(marked))
		for _, id := range marked {
			done[id] = true
		}
		var missing []uuid.UUID
		var xids []int64
		for _, ev := range evs {
			if !done[ev.msg.ID] && ev.tx != nil {
				missing, xids = append(missing, ev.msg.ID), append(xids, int64(ev.tx.xid))
			}
		}
		visible, err := r.visible(ctx, xids)
		if err != nil {
			return err
		}
		if visible {
			// Seen by this statement's snapshot and still not pending:
			// marked before, or dead-lettered by hand.
			ok, err := r.recheck(ctx, missing)
			if err != nil || ok {
				return err
			}
		}
		r.stats.unseen.Add(1)
		ids = missing
		filtered := evs[:0:0]
		for _, ev := range evs {
			if !done[ev.msg.ID] && ev.tx != nil {
				filtered = append(filtered, ev)
			}
		}
		evs = filtered
		if len(ids) == 0 {
			return nil
		}
		t := time.NewTimer(5 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// recheck marks ids once more after their transactions became visible; it
// reports whether nothing is left pending of them.
func (r *Relay) recheck(ctx context.Context, ids []uuid.UUID) (bool, error) {
	var err error
	if r.cfg.Retention > 0 {
		_, err = r.pool.Exec(ctx, `UPDATE `+r.table+` SET status = 1, published_at = $2 WHERE id = ANY($1) AND status = 0`,
			pgIDs(ids), r.cfg.Clock.Now().UTC())
	} else {
		_, err = r.pool.Exec(ctx, `DELETE FROM `+r.table+` WHERE id = ANY($1) AND status = 0`, pgIDs(ids))
	}
	return err == nil, err
}

// pgIDs converts ids for pgx, which encodes a []pgtype.UUID as a uuid[]
// directly; a []uuid.UUID goes through each element's driver.Valuer, and
// pgx formats (and drops) an error for each before it tries that.
func pgIDs(ids []uuid.UUID) []pgtype.UUID {
	out := make([]pgtype.UUID, len(ids))
	for i, id := range ids {
		out[i] = pgtype.UUID{Bytes: id, Valid: true}
	}
	return out
}

// visibleSQL reports whether the transactions of 32-bit ids $1, decoded
// from the log, are visible to a new snapshot (each id is widened to an
// xid8 with the epoch of the snapshot's xmax).
const visibleSQL = `SELECT coalesce(bool_and(pg_visible_in_snapshot(
		(CASE WHEN ((m >> 32) << 32 | x) > m THEN ((m >> 32) << 32 | x) - 4294967296 ELSE ((m >> 32) << 32 | x) END)::text::xid8, s)), true)
	FROM pg_current_snapshot() AS s, LATERAL (SELECT pg_snapshot_xmax(s)::text::bigint AS m) AS mm, unnest($1::bigint[]) AS x`

func (r *Relay) visible(ctx context.Context, xids []int64) (bool, error) {
	if len(xids) == 0 {
		return true, nil
	}
	var ok bool
	err := r.pool.QueryRow(ctx, visibleSQL, xids).Scan(&ok)
	return ok, err
}

// recordFailure counts a failed attempt on ev's row and reports the row's
// attempts and whether it is still pending. Without a row (InsertDelete
// mode) the count is the relay's own.
func (r *Relay) recordFailure(ctx context.Context, ev *event, err error) (int, bool) {
	if r.cfg.Mode == InsertDelete && ev.tx != nil {
		return ev.attempts, true
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		var attempts int
		qerr := r.pool.QueryRow(cctx, `UPDATE `+r.table+` SET attempts = attempts + 1, last_error = $2
			WHERE id = $1 AND status = 0 RETURNING attempts`, ev.msg.ID, errText(err)).Scan(&attempts)
		switch {
		case errors.Is(qerr, pgx.ErrNoRows):
			// Not pending — or its transaction not visible yet (see
			// markRows): only a visible one's absence counts.
			if ev.tx == nil {
				return ev.attempts, false
			}
			visible, verr := r.visible(cctx, []int64{int64(ev.tx.xid)})
			if verr != nil {
				r.log.Warn("cannot record a failed attempt", "id", ev.msg.ID, "error", verr)
				return ev.attempts, true
			}
			if visible {
				var n int
				if verr := r.pool.QueryRow(cctx, `SELECT count(*) FROM `+r.table+` WHERE id = $1 AND status = 0`, ev.msg.ID).Scan(&n); verr != nil {
					return ev.attempts, true
				}
				if n == 0 {
					return ev.attempts, false
				}
			}
			t := time.NewTimer(5 * time.Millisecond)
			select {
			case <-cctx.Done():
				t.Stop()
				return ev.attempts, true
			case <-t.C:
			}
		case qerr != nil:
			r.log.Warn("cannot record a failed attempt", "id", ev.msg.ID, "error", qerr)
			return ev.attempts, true
		default:
			return attempts, true
		}
	}
}

// writeDead writes ev's row dead.
func (r *Relay) writeDead(ctx context.Context, ev *event, err error) error {
	return r.retryStore(ctx, "write a dead event", func(ctx context.Context) error {
		return r.writeDeadRow(ctx, &row{msg: ev.msg}, errText(err), ev.attempts)
	})
}

// writeDeadRow makes the row dead, writing it back when it is gone
// (InsertDelete mode): the stream skips the insert, its status being 2.
func (r *Relay) writeDeadRow(ctx context.Context, rw *row, reason string, attempts int) error {
	args, err := rowArgs(&rw.msg)
	if err != nil {
		return err
	}
	_, err = r.pool.Exec(ctx, `INSERT INTO `+r.table+` AS o
		(id, topic, key, type, payload, headers, created_at, available_at, status, attempts, last_error)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 2, $9, $10)
		ON CONFLICT (id) DO UPDATE SET status = 2, attempts = EXCLUDED.attempts, last_error = EXCLUDED.last_error
		WHERE o.status = 0`, append(args, attempts, reason)...)
	return err
}

// holdRow writes a delayed event's row back, pending, in InsertDelete mode,
// so that the due sweep publishes it when due, across restarts.
func (r *Relay) holdRow(ctx context.Context, rw *row) error {
	args, err := rowArgs(&rw.msg)
	if err != nil {
		return err
	}
	_, err = r.pool.Exec(ctx, `INSERT INTO `+r.table+`
		(id, topic, key, type, payload, headers, created_at, available_at, status, attempts, last_error)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0, 0, $9)
		ON CONFLICT (id) DO NOTHING`, append(args, heldMarker)...)
	return err
}

func rowArgs(m *outbox.Message) ([]any, error) {
	var headers any
	if len(m.Headers) > 0 {
		h, err := headerjson.Marshal(m.Headers)
		if err != nil {
			return nil, err
		}
		headers = string(h)
	}
	available := m.CreatedAt
	if m.NotBefore.After(available) {
		available = m.NotBefore
	}
	payload := m.Payload
	if payload == nil {
		payload = []byte{}
	}
	return []any{m.ID, m.Topic, m.Key, m.Type, payload, headers, m.CreatedAt.UTC(), available.UTC()}, nil
}

// sweeper publishes delayed events that have come due, and replayed dead
// ones: pending rows whose available_at is past their created_at. It runs
// while the relay holds the slot.
func (r *Relay) sweeper(ctx context.Context) {
	e := r.eng
	for r.sleep(ctx, r.cfg.PollInterval) {
		if !r.active.Load() {
			continue
		}
		e.mu.Lock()
		room := min(r.cfg.BatchSize, r.cfg.Window-e.events)
		paused := e.paused()
		e.mu.Unlock()
		if room <= 0 || paused {
			continue
		}
		if err := r.sweep(ctx, room); err != nil && ctx.Err() == nil {
			r.log.Error("due sweep failed", "error", err)
		}
	}
}

// sweepSQL reads table's first $2 pending rows that are delayed or
// replayed (available_at past created_at) and due at $1. Its predicate is
// the one of the table's delayed index (migration 004_delayed), which holds
// those rows only: without it, every sweep would read the whole table.
func sweepSQL(table string) string {
	return `SELECT id, topic, key, type, payload, headers, created_at, available_at, attempts
		FROM ` + table + ` WHERE status = 0 AND available_at > created_at AND available_at <= $1
		ORDER BY available_at, seq LIMIT $2`
}

func (r *Relay) sweep(ctx context.Context, limit int) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rows, err := r.pool.Query(cctx, sweepSQL(r.table), r.cfg.Clock.Now().UTC(), limit)
	if err != nil {
		return err
	}
	var evs []*event
	for rows.Next() {
		ev := &event{mark: true}
		var headers []byte
		m := &ev.msg
		if err := rows.Scan(&m.ID, &m.Topic, &m.Key, &m.Type, &m.Payload, &headers, &m.CreatedAt, &m.NotBefore, &ev.attempts); err != nil {
			rows.Close()
			return err
		}
		if len(headers) > 0 {
			if err := headerjson.Unmarshal(headers, &m.Headers); err != nil {
				r.log.Error("delayed event with undecodable headers; making it dead", "id", m.ID, "error", err)
				_ = r.writeDeadRow(ctx, &row{msg: *m}, "pgcdc: headers are not a JSON object of strings: "+err.Error(), ev.attempts+1)
				continue
			}
		}
		evs = append(evs, ev)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	e := r.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ev := range evs {
		if e.swept[ev.msg.ID] {
			continue
		}
		e.swept[ev.msg.ID] = true
		e.add(ev)
		r.stats.swept.Add(1)
	}
	if len(evs) > 0 {
		e.notify()
	}
	return nil
}

// heartbeat writes a message to the log every HeartbeatInterval, so that
// the slot's confirmed position follows the server's on an idle outbox.
func (r *Relay) heartbeat(ctx context.Context) {
	for r.sleep(ctx, r.cfg.HeartbeatInterval) {
		if !r.active.Load() {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := r.pool.Exec(cctx, `SELECT pg_logical_emit_message(false, $1, '')`, HeartbeatPrefix)
		cancel()
		if err != nil && ctx.Err() == nil {
			r.log.Warn("heartbeat failed", "error", err)
		}
	}
}

// purge deletes published rows past the retention, in small batches.
func (r *Relay) purge(ctx context.Context) {
	for r.sleep(ctx, r.cfg.PurgeInterval) {
		before := r.cfg.Clock.Now().Add(-r.cfg.Retention).UTC()
		for {
			tag, err := r.pool.Exec(ctx, `DELETE FROM `+r.table+` WHERE seq IN (SELECT seq FROM `+r.table+
				` WHERE status = 1 AND published_at < $1 ORDER BY published_at LIMIT 1000 FOR UPDATE SKIP LOCKED)`, before)
			if err != nil {
				if ctx.Err() == nil {
					r.log.Error("purge failed", "error", err)
				}
				break
			}
			if tag.RowsAffected() < 1000 {
				break
			}
		}
	}
}

// maxErrorText bounds the error text stored with a failed event.
const maxErrorText = 4096

// errText is err's text as text can hold it: valid UTF-8 without NUL, at
// most maxErrorText bytes.
func errText(err error) string {
	s := strings.ToValidUTF8(strings.ReplaceAll(err.Error(), "\x00", "\uFFFD"), "\uFFFD")
	if len(s) <= maxErrorText {
		return s
	}
	cut := maxErrorText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
