package postgres

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// isSchemaMissing reports whether err says the outbox schema or table does
// not exist (undefined_table, invalid_schema_name).
func isSchemaMissing(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "42P01" || pgErr.Code == "3F000"
	}
	return false
}
