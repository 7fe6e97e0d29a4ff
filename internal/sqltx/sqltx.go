// Package sqltx runs a function in a database/sql transaction: the RunTx
// of every inbox driver over database/sql.
package sqltx

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Run begins a transaction on db, runs fn in it and commits; when fn fails
// or panics it rolls back and returns fn's error. pkg prefixes the errors
// of begin and commit ("postgres: inbox", …).
func Run(ctx context.Context, db *sql.DB, pkg string, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: begin: %w", pkg, err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback() // also on panic
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	committed = true
	if err := Commit(ctx, tx); err != nil {
		return fmt.Errorf("%s: commit: %w", pkg, err)
	}
	return nil
}

// Commit commits tx, begun with ctx. When ctx ends during a transaction,
// database/sql rolls it back, and Commit then says only sql.ErrTxDone
// ("transaction has already been committed or rolled back"); the error
// returned names the context's end instead, and wraps both, so that a
// caller stopped on purpose sees errors.Is(err, context.Canceled).
func Commit(ctx context.Context, tx *sql.Tx) error {
	err := tx.Commit()
	if err != nil && ctx.Err() != nil && errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("%w: rolled back (%w)", context.Cause(ctx), err)
	}
	return err
}
