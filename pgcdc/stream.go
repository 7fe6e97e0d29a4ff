package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/outboxgo/outbox"
)

// HeartbeatPrefix is the prefix of the relay's heartbeat messages in the
// write-ahead log (pg_logical_emit_message).
const HeartbeatPrefix = "outbox-heartbeat"

// ErrSlotLost says the replication slot was invalidated (wal_status
// 'lost', most often by max_slot_wal_keep_size): the server has removed
// WAL the slot still needed, so the stream cannot resume from it.
var ErrSlotLost = errors.New("pgcdc: the replication slot was invalidated (wal_status lost)")

// errSlotInUse says another session (another relay) streams from the slot.
var errSlotInUse = errors.New("the replication slot is in use by another session")

// run streams until the relay stops, reconnecting after errors; a slot in
// use makes it wait as a hot standby.
func (r *Relay) run(ctx context.Context) {
	failures := 0
	standby := false
	for ctx.Err() == nil && !r.stopping() {
		err := r.session(ctx)
		r.active.Store(false)
		if ctx.Err() != nil || err == nil {
			return
		}
		var wait time.Duration
		switch {
		case errors.Is(err, errSlotInUse):
			if !standby {
				r.log.Info("replication slot in use by another relay; waiting as a hot standby", "slot", r.cfg.Slot, "retry_every", r.cfg.StandbyRetry)
			}
			standby, failures, wait = true, 0, r.cfg.StandbyRetry
		default:
			standby = false
			failures++
			r.stats.restarts.Add(1)
			wait = r.cfg.OutageBackoff.Delay(failures)
			if errors.Is(err, errServerShutdown) {
				r.log.Warn("let go of the stream so that PostgreSQL can shut down; streaming again from the slot's confirmed position "+
					"once the server is back (the unconfirmed events are sent again)", "slot", r.cfg.Slot, "retry_in", wait.Round(time.Millisecond), "reason", err)
				break
			}
			lvl := "stream failed; reconnecting"
			if errors.Is(err, ErrSlotLost) {
				lvl = "the replication slot was invalidated: drop and recreate it (pending rows stay in the table in mark mode; drain them with the polling relay)"
			}
			r.log.Error(lvl, "slot", r.cfg.Slot, "retry_in", wait.Round(time.Millisecond), "error", err)
		}
		r.sleep(ctx, wait)
	}
}

// session runs one streaming session: set up, stream, and on Stop drain
// and confirm. It returns nil after a graceful stop.
func (r *Relay) session(ctx context.Context) error {
	if err := r.setup(ctx); err != nil {
		return err
	}
	conn, err := pgconn.ConnectConfig(ctx, r.repl)
	if err != nil {
		return fmt.Errorf("connect for replication: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	confirmed, err := r.slotPosition(ctx)
	if err != nil {
		return err
	}
	args := []string{
		"proto_version '1'",
		"publication_names '" + r.cfg.Publication + "'",
		"messages 'true'",
	}
	if r.cfg.Debezium == nil {
		// The outbox table's columns in binary (PostgreSQL 14+): no hex
		// payloads or text timestamps to decode. A Debezium table may
		// have columns of types without a binary form: text there.
		args = append(args, "binary 'true'")
	}
	err = pglogrepl.StartReplication(ctx, conn, r.cfg.Slot, 0, pglogrepl.StartReplicationOptions{PluginArgs: args})
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "55006" {
			return errSlotInUse
		}
		return fmt.Errorf("start replication: %w", err)
	}
	r.eng.reset(ctx, confirmed)
	r.shutdownSeen.Store(false)
	r.active.Store(true)
	r.log.Info("streaming", "slot", r.cfg.Slot, "from", confirmed.String())
	s := &stream{r: r, conn: conn, rels: map[uint32]*relation{}, types: pgtype.NewMap(), sent: confirmed}
	defer func() {
		if s.rcancel != nil {
			s.rcancel()
		}
	}()
	return s.loop(ctx)
}

// stream is one streaming session's state.
type stream struct {
	r     *Relay
	conn  *pgconn.PgConn
	rels  map[uint32]*relation
	types *pgtype.Map
	cols  []column // the last insert's, reused
	// commitTime is the current transaction's (a Debezium row's CreatedAt).
	commitTime time.Time
	cur        *txn
	sent       pglogrepl.LSN // last LSN confirmed to the server
	// reply: the server asked for a status update.
	reply bool
	// rctx ends at rdeadline, the receive deadline (see until).
	rctx      context.Context
	rcancel   context.CancelFunc
	rdeadline time.Time
}

func (s *stream) loop(ctx context.Context) error {
	r, e := s.r, s.r.eng
	next := time.Now()
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if r.shutdownSeen.Load() {
			return errServerShutdown
		}
		e.mu.Lock()
		stopping := r.stopping()
		canRead := (!stopping || s.cur != nil) && e.events < r.cfg.Window && !e.paused()
		drained := stopping && len(e.txns) == 0 && s.cur == nil
		confirm, ch := e.confirmable, e.changed
		e.mu.Unlock()
		if now := time.Now(); !now.Before(next) || s.reply || drained {
			if err := s.status(ctx, confirm); err != nil {
				return err
			}
			s.reply = false
			next = now.Add(r.cfg.StatusInterval)
		}
		if drained {
			return nil
		}
		if !canRead {
			stopCh := r.stop
			if stopping {
				stopCh = nil // noted already: wait for progress
			}
			t := time.NewTimer(time.Until(next))
			select {
			case <-ctx.Done():
			case <-ch:
			case <-t.C:
			case <-stopCh:
			}
			t.Stop()
			continue
		}
		raw, err := s.conn.ReceiveMessage(s.until(ctx, next))
		if err != nil {
			if pgconn.Timeout(err) && ctx.Err() == nil {
				continue
			}
			return fmt.Errorf("receive: %w", err)
		}
		switch m := raw.(type) {
		case *pgproto3.CopyData:
			if err := s.copyData(ctx, m.Data); err != nil {
				return err
			}
		case *pgproto3.ErrorResponse:
			err := pgconn.ErrorResponseToPgError(m)
			if err.Code == "55000" {
				return fmt.Errorf("%w: %v", ErrSlotLost, err)
			}
			return fmt.Errorf("server: %w", err)
		}
	}
}

// until returns a context of ctx that ends at deadline, the one of the
// last call while deadline is the same: one per status interval, not one
// per message received.
func (s *stream) until(ctx context.Context, deadline time.Time) context.Context {
	if s.rctx == nil || !s.rdeadline.Equal(deadline) {
		if s.rcancel != nil {
			s.rcancel()
		}
		s.rctx, s.rcancel = context.WithDeadline(ctx, deadline)
		s.rdeadline = deadline
	}
	return s.rctx
}

// status sends a standby status update confirming lsn.
func (s *stream) status(ctx context.Context, lsn pglogrepl.LSN) error {
	if err := pglogrepl.SendStandbyStatusUpdate(ctx, s.conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: lsn}); err != nil {
		return fmt.Errorf("standby status update: %w", err)
	}
	if lsn > s.sent {
		s.sent = lsn
		s.r.stats.confirms.Add(1)
		if h := s.r.cfg.Hooks.AfterConfirm; h != nil {
			h(lsn.String())
		}
	}
	return nil
}

func (s *stream) copyData(ctx context.Context, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	e := s.r.eng
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		k, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return err
		}
		s.reply = s.reply || k.ReplyRequested
		e.mu.Lock()
		if len(e.txns) == 0 && s.cur == nil {
			// Nothing of the stream is unfinished: everything up to the
			// server's end has been seen and done.
			e.confirmable = max(e.confirmable, k.ServerWALEnd)
		}
		e.mu.Unlock()
	case pglogrepl.XLogDataByteID:
		x, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return err
		}
		return s.logical(ctx, x)
	}
	return nil
}

// logical handles one pgoutput message.
func (s *stream) logical(ctx context.Context, x pglogrepl.XLogData) error {
	r, e := s.r, s.r.eng
	if len(x.WALData) > 0 && x.WALData[0] == 'I' {
		return s.insertMessage(ctx, x.WALData[1:])
	}
	m, err := pglogrepl.Parse(x.WALData)
	if err != nil {
		return fmt.Errorf("parse pgoutput: %w", err)
	}
	switch m := m.(type) {
	case *pglogrepl.RelationMessage:
		schema, table := r.cfg.Schema, r.cfg.Table
		if d := r.cfg.Debezium; d != nil {
			schema, table = d.Schema, d.Table
		}
		s.rels[m.RelationID] = newRelation(m, schema, table)
	case *pglogrepl.BeginMessage:
		s.cur = &txn{xid: m.Xid, commit: m.CommitTime}
		s.commitTime = m.CommitTime
		e.mu.Lock()
		e.txns = append(e.txns, s.cur)
		e.mu.Unlock()
	case *pglogrepl.CommitMessage:
		if s.cur == nil {
			return errors.New("commit without begin")
		}
		e.mu.Lock()
		s.cur.end, s.cur.committed = m.TransactionEndLSN, true
		e.advance()
		e.notify()
		e.mu.Unlock()
		s.cur = nil
	case *pglogrepl.LogicalDecodingMessage:
		if m.Transactional || s.cur != nil {
			return nil
		}
		// A heartbeat (or another non-transactional message): done once
		// everything before it is.
		e.mu.Lock()
		e.txns = append(e.txns, &txn{end: m.LSN, committed: true})
		e.advance()
		e.notify()
		e.mu.Unlock()
	}
	return nil
}

// insertMessage handles an Insert message's body.
func (s *stream) insertMessage(ctx context.Context, body []byte) error {
	r := s.r
	relID, cols, err := parseInsert(body, s.cols)
	s.cols = cols
	if err != nil {
		return err
	}
	rel := s.rels[relID]
	if rel == nil || !rel.outbox || s.cur == nil {
		return nil
	}
	var row *row
	if d := r.cfg.Debezium; d != nil {
		row, err = rel.decodeDebezium(d, cols, s.commitTime, s.types)
	} else {
		row, err = rel.decode(cols, s.types)
	}
	if err != nil {
		r.log.Error("cannot decode an outbox row; it is skipped", "error", err)
		return nil
	}
	return s.insert(ctx, row)
}

// insert takes one decoded outbox row.
func (s *stream) insert(ctx context.Context, row *row) error {
	r, e := s.r, s.r.eng
	if row.status != 0 || row.held {
		// A dead row or a delayed row the relay wrote itself.
		return nil
	}
	r.stats.decoded.Add(1)
	if row.badErr != nil {
		// The row cannot become a message: dead at once.
		return r.retryStore(ctx, "dead-letter an undecodable row", func(ctx context.Context) error {
			return r.writeDeadRow(ctx, row, row.badErr.Error(), 1)
		})
	}
	if row.msg.NotBefore.After(row.msg.CreatedAt) {
		// Delayed: the due sweep publishes it from the table when due.
		r.stats.delayed.Add(1)
		if r.cfg.Mode == InsertDelete {
			return r.retryStore(ctx, "hold a delayed event", func(ctx context.Context) error { return r.holdRow(ctx, row) })
		}
		return nil
	}
	e.mu.Lock()
	e.add(&event{msg: row.msg, tx: s.cur, mark: r.cfg.Mode == MarkRows})
	if s.cur.open%r.cfg.BatchSize == 0 || e.events >= r.cfg.Window || e.paused() {
		// A long transaction: its events so far fill a batch, or the
		// window, and go out before its commit arrives (the stream
		// waits for the window meanwhile). Or the broker is down and
		// the stream now pauses on this event, before the commit that
		// would wake the dispatcher: the breaker probes the broker with
		// it.
		e.notify()
	}
	e.mu.Unlock()
	return nil
}

// retryStore runs f until it succeeds, with backoff, or ctx ends.
func (r *Relay) retryStore(ctx context.Context, what string, f func(context.Context) error) error {
	b := outbox.Backoff{Min: 100 * time.Millisecond, Max: 10 * time.Second, Jitter: 0.2}
	for n := 1; ; n++ {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := f(cctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		d := b.Delay(n)
		r.log.Error("cannot "+what+"; retrying", "error", err, "retry_in", d.Round(time.Millisecond))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
