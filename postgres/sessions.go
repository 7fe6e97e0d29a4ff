package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox/stores"
)

var _ stores.SessionLister = (*Store)(nil)

// Sessions implements stores.SessionLister from pg_stat_activity: the
// sessions of this database whose application_name starts with
// stores.RelayApplication or stores.CDCApplication. A role without
// pg_read_all_stats sees the application name of other roles' sessions
// but not their state.
func (s *Store) Sessions(ctx context.Context) ([]stores.Session, error) {
	rows, err := s.pool.Query(ctx, `SELECT application_name,
			coalesce(host(client_addr) || ':' || client_port, 'local'), pid, backend_start,
			coalesce(state, ''), xact_start
		FROM pg_stat_activity
		WHERE datname = current_database() AND backend_type = 'client backend'
			AND (starts_with(application_name, $1) OR starts_with(application_name, $2))
		ORDER BY application_name, backend_start, pid`, stores.RelayApplication, stores.CDCApplication)
	if err != nil {
		return nil, wrap("sessions", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (stores.Session, error) {
		var ss stores.Session
		var connected, inTx *time.Time
		err := r.Scan(&ss.Application, &ss.Client, &ss.PID, &connected, &ss.State, &inTx)
		if connected != nil {
			ss.Connected = connected.UTC()
		}
		if inTx != nil {
			ss.InTxSince = inTx.UTC()
		}
		return ss, err
	})
	if err != nil {
		return nil, wrap("sessions", err)
	}
	return out, nil
}
