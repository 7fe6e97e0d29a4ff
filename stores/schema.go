package stores

import "time"

// Migration is one numbered step of one table's schema, rendered for a
// database package's Config: Up brings the table from Version-1 to
// Version, Down takes it back (Down of version 1 drops the table). Each
// database package lists its steps (Migrations) for teams that migrate
// with their own tool.
type Migration struct {
	// Table is the table it migrates, as the database names it:
	// outbox.messages, outbox_messages.
	Table string
	// Version is the version Up brings the table to, counted from 1 for
	// each table on its own.
	Version int
	// Name is the step's name, as in its file name (001_outbox.up.sql):
	// "outbox" and "inbox" for the first step of each table.
	Name string
	// Up and Down are the SQL, a script of statements.
	Up, Down string
}

// SchemaVersion is where one table's schema stands, as a database
// package's SchemaVersions reads it.
type SchemaVersion struct {
	// Table is the table, as the database names it.
	Table string
	// Version is the version applied: 0 when the table does not exist. A
	// table that exists without a recorded version (made before versions
	// were recorded, or from the plain SQL by hand) is at version 1.
	Version int
	// Latest is the version Migrate brings the table to.
	Latest int
	// AppliedAt is when Version was recorded, in UTC; zero when it is not
	// recorded.
	AppliedAt time.Time
}
