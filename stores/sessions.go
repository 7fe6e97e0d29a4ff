package stores

import (
	"context"
	"time"
)

// SessionLister is implemented by stores whose database can list the
// relays connected to it (PostgreSQL's pg_stat_activity): the dashboard's
// "relays seen". A relay is seen by its connections' application name,
// which must start with RelayApplication (as `outbox relay` names its
// connections, "outbox relay <host> pid <pid>") or CDCApplication. It is
// not part of Store: the table itself records no relay, since a claim is
// a lock of the claiming transaction.
type SessionLister interface {
	// Sessions lists the database sessions of relays, by application name,
	// then by connection time.
	Sessions(ctx context.Context) ([]Session, error)
}

// The application names SessionLister lists start with one of these: the
// polling relay's (the CLI's "outbox relay <host> pid <pid>"; an embedded
// relay shows when its pool's URL sets application_name=outbox relay
// <name>) and the CDC relay's (pgcdc's default).
const (
	RelayApplication = "outbox relay"
	CDCApplication   = "outbox-cdc"
)

// Session is one database connection of a relay.
type Session struct {
	// Application is the connection's application name.
	Application string
	// Client is the client's address and port, or "local" for a Unix
	// socket.
	Client string
	// PID is the server process serving the connection.
	PID int
	// Connected is when the connection was opened.
	Connected time.Time
	// State is the server's word for what the connection does: "active"
	// (running a statement), "idle", "idle in transaction" (between the
	// statements of a transaction: a claim being published), …
	State string
	// InTxSince is when the connection's current transaction began (zero
	// when it has none): for a relay, a claim held since then.
	InTxSince time.Time
}
