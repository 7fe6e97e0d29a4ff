package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	natspub "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/relay"
	"github.com/outboxgo/outbox/subscribers"
)

// Topics of the flow.
const (
	TopicRequested = "workspace_update_requested" // the command
	TopicCompleted = "workspace_update_completed" // the notification
)

// Config names where the example keeps things, so tests can isolate it.
type Config struct {
	// Schema holds the outbox, the inbox and the example's tables.
	Schema string
	// Stream captures Prefix + ".>": every event of the flow.
	Stream, Prefix string
	// DeadSubject receives commands that failed MaxDeliver times; a stream
	// other than Stream must capture it.
	DeadSubject string
	// MaxDeliver is how many times the worker tries a command.
	MaxDeliver int
	// Retry is the worker's first retry delay (it doubles).
	Retry time.Duration
}

// Provider is the external system that applies an update (an HTTP API, say).
// It is not part of the transaction: it may be called more than once for
// one command, so it takes an idempotency key.
type Provider func(ctx context.Context, workspaceID, name, idempotencyKey string) error

// UpdateRequested is the command's payload; UpdateCompleted the
// notification's.
type UpdateRequested struct {
	CommandID   uuid.UUID `json:"command_id"`
	WorkspaceID string    `json:"workspace_id"`
	Name        string    `json:"name"`
}

type UpdateCompleted struct {
	CommandID   uuid.UUID `json:"command_id"`
	WorkspaceID string    `json:"workspace_id"`
	Name        string    `json:"name"`
}

// App is the service: an API that records commands, and a worker that
// carries them out.
type App struct {
	cfg      Config
	pool     *pgxpool.Pool
	db       *postgres.DB
	ob       *outbox.Outbox[pgx.Tx]
	in       *inbox.Inbox[pgx.Tx]
	provider Provider
}

// NewApp wires the outbox and the inbox to pool, in cfg.Schema.
func NewApp(pool *pgxpool.Pool, cfg Config, provider Provider) (*App, error) {
	// One object serves the outbox (enqueue and the relay's store) and the
	// worker's inbox.
	db, err := postgres.New(pool, &postgres.Config{Schema: cfg.Schema, InboxTable: "workspace_worker_inbox"})
	if err != nil {
		return nil, err
	}
	in, err := inbox.New(db.Inbox(), nil)
	if err != nil {
		return nil, err
	}
	return &App{cfg: cfg, pool: pool, db: db, ob: outbox.New(db, nil), in: in,
		provider: provider}, nil
}

// Migrate creates the outbox, the inbox and the example's tables.
func (a *App) Migrate(ctx context.Context) error {
	if err := a.db.Migrate(ctx); err != nil { // the outbox and the inbox tables
		return err
	}
	_, err := a.pool.Exec(ctx, fmt.Sprintf(`
		CREATE TABLE IF NOT EXISTS %[1]s.workspaces (id text PRIMARY KEY, name text NOT NULL);
		CREATE TABLE IF NOT EXISTS %[1]s.workspace_update_commands (
			id uuid PRIMARY KEY, workspace_id text NOT NULL, name text NOT NULL,
			status text NOT NULL DEFAULT 'pending');`, pgx.Identifier{a.cfg.Schema}.Sanitize()))
	return err
}

func (a *App) table(name string) string { return pgx.Identifier{a.cfg.Schema, name}.Sanitize() }

// RequestUpdate is the API side: one transaction records the command row
// and enqueues workspace_update_requested.
func (a *App) RequestUpdate(ctx context.Context, workspaceID, name string) (uuid.UUID, error) {
	cmd := UpdateRequested{CommandID: outbox.NewID(), WorkspaceID: workspaceID, Name: name}
	body, err := json.Marshal(cmd)
	if err != nil {
		return uuid.Nil, err
	}
	err = pgx.BeginFunc(ctx, a.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO `+a.table("workspaces")+` VALUES ($1, '') ON CONFLICT DO NOTHING`, workspaceID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+a.table("workspace_update_commands")+` (id, workspace_id, name) VALUES ($1, $2, $3)`,
			cmd.CommandID, workspaceID, name); err != nil {
			return err
		}
		return a.ob.Enqueue(ctx, tx, outbox.Message{Topic: TopicRequested, Key: workspaceID, Type: "WorkspaceUpdateRequested", Payload: body})
	})
	return cmd.CommandID, err
}

// HandleUpdateRequested is the worker: it calls the provider, and on
// success one transaction — the inbox's — records the event's ID, applies
// the update, clears the command row and enqueues workspace_update_completed.
// On failure it returns the error: the transaction rolls back, nothing is
// recorded or announced, and the subscriber retries, then dead-letters.
func (a *App) HandleUpdateRequested(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
	var cmd UpdateRequested
	if err := json.Unmarshal(m.Payload, &cmd); err != nil {
		return inbox.Permanent(fmt.Errorf("bad %s payload: %w", TopicRequested, err))
	}
	if err := a.provider(ctx, cmd.WorkspaceID, cmd.Name, m.ID.String()); err != nil {
		return fmt.Errorf("provider: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE `+a.table("workspaces")+` SET name = $2 WHERE id = $1`, cmd.WorkspaceID, cmd.Name); err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, `DELETE FROM `+a.table("workspace_update_commands")+` WHERE id = $1`, cmd.CommandID)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return inbox.Permanent(fmt.Errorf("command %s not found", cmd.CommandID))
	}
	body, err := json.Marshal(UpdateCompleted(cmd))
	if err != nil {
		return err
	}
	return a.ob.Enqueue(ctx, tx, outbox.Message{Topic: TopicCompleted, Key: cmd.WorkspaceID, Type: "WorkspaceUpdateCompleted",
		Payload: body, Headers: map[string]string{"causation-id": m.ID.String()}})
}

// Running is the relay and the worker, started by Start.
type Running struct {
	relay  *relay.Relay
	pub    *natspub.Publisher
	worker *natspub.Subscriber[pgx.Tx]
}

// Start runs the relay (outbox → NATS) and the worker (NATS → inbox).
func (a *App) Start(ctx context.Context, natsURL string, js jetstream.JetStream) (*Running, error) {
	pub, err := natspub.NewPublisher(&natspub.PublisherConfig{URL: natsURL, SubjectPrefix: a.cfg.Prefix})
	if err != nil {
		return nil, err
	}
	r, err := relay.New(a.db.Store(), pub, &relay.Config{PollInterval: 100 * time.Millisecond})
	if err != nil {
		_ = pub.Close()
		return nil, err
	}
	w, err := natspub.NewSubscriber(js, a.in, a.HandleUpdateRequested, &natspub.SubscriberConfig{
		Stream: a.cfg.Stream, Durable: "workspace-worker", SubjectPrefix: a.cfg.Prefix,
		FilterSubjects:    []string{a.cfg.Prefix + "." + TopicRequested},
		DeadLetterSubject: a.cfg.DeadSubject,
		Options: subscribers.Options{MaxDeliveries: a.cfg.MaxDeliver,
			Backoff: outbox.Backoff{Min: a.cfg.Retry, Max: 10 * a.cfg.Retry}},
	})
	if err != nil {
		_ = pub.Close()
		return nil, err
	}
	if err := r.Start(ctx); err != nil {
		_ = pub.Close()
		return nil, err
	}
	run := &Running{relay: r, pub: pub}
	if err := w.Start(ctx); err != nil {
		_ = run.Stop(ctx)
		return nil, err
	}
	run.worker = w
	return run, nil
}

// Stop stops the worker, then the relay, gracefully.
func (r *Running) Stop(ctx context.Context) error {
	var errs []error
	if r.worker != nil {
		errs = append(errs, r.worker.Stop(ctx))
	}
	errs = append(errs, r.relay.Stop(ctx), r.pub.Close())
	return errors.Join(errs...)
}
