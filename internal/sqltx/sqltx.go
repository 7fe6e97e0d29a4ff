// Package sqltx runs a function in a database/sql transaction: the RunTx
// of every inbox driver over database/sql.
package sqltx

import (
	"context"
	"database/sql"
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
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: commit: %w", pkg, err)
	}
	return nil
}
