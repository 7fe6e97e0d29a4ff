package stores

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
)

// Store is the relay's view of an outbox table.
type Store interface {
	// Claim takes up to p.Limit due pending records (NotBefore and next
	// attempt at or before p.Now), oldest first. The batch must be
	// completed or aborted; an empty batch is not an error.
	Claim(ctx context.Context, p ClaimParams) (Batch, error)
	// Stats reports per-topic counts as of p.Now, ordered by topic.
	Stats(ctx context.Context, p StatsParams) ([]TopicStats, error)
	// Blocked lists the keys held back by a failing head: each key whose
	// oldest pending record has failed at least once, with that record,
	// oldest head first (by CreatedAt). In ordered mode such a key
	// publishes nothing else until its head succeeds or is dead-lettered.
	// A key is one key across every topic, as the claim orders it;
	// unkeyed records are never blocked. Its cost grows with the number of
	// pending keys, never with published history.
	Blocked(ctx context.Context, p BlockedParams) ([]BlockedKey, error)
	// Dead lists dead records, oldest first (by CreatedAt, then ID),
	// filtered by p and starting after p.After: a keyset page, stable
	// under concurrent inserts and deletes. Its cost grows with the page
	// and, for p.Key or p.CreatedBefore, with the dead records of the
	// range that they filter out — never with pending or published rows.
	Dead(ctx context.Context, p DeadParams) ([]Record, error)
	// DeadCount counts the dead records Dead would list over every page:
	// p's filters (IDs, Topic, Key, CreatedBefore) apply, p.After and
	// p.Limit do not. Its cost grows with the dead records it counts.
	DeadCount(ctx context.Context, p DeadParams) (int64, error)
	// Replay makes dead records pending again with zero attempts, due at
	// p.Now. It returns how many it revived.
	Replay(ctx context.Context, p ReplayParams) (int64, error)
	// Discard deletes the records named in p.IDs that are dead, and only
	// them: pending and published records, and IDs not found, are left
	// alone. No IDs deletes nothing. It returns how many it deleted. Its
	// cost grows with the number of IDs.
	Discard(ctx context.Context, p DiscardParams) (int64, error)
	// Republish makes published records (kept by retention, see
	// relay.Config.Retention) created in [p.From, p.To) pending again,
	// due at p.Now with zero attempts, oldest first (by CreatedAt, then
	// ID) and at most p.Limit of them: the relay sends them again, with
	// their IDs unchanged. It returns how many it made pending; zero when
	// the range holds no published record (none was created then, or
	// retention already purged them, or the relay deletes what it
	// publishes).
	//
	// A republished record keeps its place in its key's order (insertion
	// order): a key's re-sent records go out in their original order, and
	// before the key's pending records that are newer. Consumers, though,
	// receive them after the newer events they already had: a re-send
	// rewinds the key, it does not reorder what was delivered. Inbox
	// consumers deduplicate by ID and drop every re-sent event they
	// recorded — a re-send is for a consumer that lost its state (its
	// inbox with it) or a new one. Its cost
	// grows with the published records published since p.From (the
	// published index), never with pending or dead rows.
	Republish(ctx context.Context, p RepublishParams) (int64, error)
	// DeadLetter makes pending records dead by hand: the way to let a key
	// go on past a head that keeps failing. Their last error keeps the
	// broker's last refusal, with p.Reason beside it ("<reason>; last
	// error: <error>"), or is p.Reason alone for a record that never
	// failed; an empty p.Reason leaves the last error as it was. Records
	// not pending are left alone. It returns how many it made dead.
	DeadLetter(ctx context.Context, p DeadLetterParams) (int64, error)
	// Purge deletes up to p.Limit published records published before
	// p.Before, and up to p.Limit dead records created before
	// p.DeadBefore; a zero bound deletes none of its kind. It returns how
	// many it deleted of both. Concurrent purges do not block each other.
	// Its cost grows with the rows it deletes (the published and the dead
	// indexes).
	Purge(ctx context.Context, p PurgeParams) (int64, error)
	// Migrate creates the schema idempotently.
	Migrate(ctx context.Context) error
	// ClaimTimeout is how long a claim holds its records before another
	// relay may take them. The relay's publish timeout must be shorter,
	// or a slow publish lets a second relay publish the same records.
	ClaimTimeout() time.Duration
}

// Listener is implemented by stores that can announce new events (PostgreSQL's
// LISTEN/NOTIFY). Listen calls wake each time events may have committed, until
// ctx is done; it reconnects by itself after a lost connection and returns
// only when ctx is done. A missed wake-up costs latency, never an event: the
// relay polls as well.
type Listener interface {
	Listen(ctx context.Context, wake func()) error
	// WakeUps says how Listen learns of new events, for the relay's
	// start line: "LISTEN/NOTIFY on channel outbox_messages", "a read of
	// the insert counter every 10ms".
	WakeUps() string
}

// QuietListener is a Listener whose announcements can say that their
// writer will now commit for a while without announcing: writers that
// pace their announcements (PostgreSQL's NotifyDebounce) say so with the
// one after which they start skipping. A relay looks for events every few
// milliseconds during such a quiet spell, and otherwise waits to be woken.
type QuietListener interface {
	Listener
	// ListenQuiet is Listen whose wake gets, with each announcement, how
	// long its writer may now commit without announcing: zero when it
	// announces its next commit too, negative when the announcement does
	// not say (a writer that predates the signal, or one that announces
	// every commit and says nothing). A reconnect's wake-up says -1.
	ListenQuiet(ctx context.Context, wake func(quiet time.Duration)) error
}

// Batch is a claim. It must end with exactly one Complete or Abort; Abort
// after Complete is a no-op, so `defer b.Abort(ctx)` is the idiom.
type Batch interface {
	// Records are the claimed records, oldest first, except that the
	// records of one key come in the key's order (see ClaimParams.PerKey).
	Records() []Record
	// Complete applies o and releases the batch.
	Complete(ctx context.Context, o Outcome) error
	// Abort releases the batch and changes nothing.
	Abort(ctx context.Context) error
}

// Record is a stored message with its delivery state.
type Record struct {
	outbox.Message
	// Attempts counts failed publish attempts so far.
	Attempts int
	// LastError is the error of the last failed attempt.
	LastError string
}

// ClaimParams says what to claim.
type ClaimParams struct {
	// Limit is the most records to claim; it must be positive.
	Limit int
	// Now is the relay's clock: records due at or before Now are claimed.
	Now time.Time
	// Unordered turns per-key order off: every due record may be claimed,
	// whatever its key. By default (false) a record with a non-empty key is
	// claimed only when it is the oldest pending record of its key (its
	// head) and no other batch holds it, so one key has at most one record
	// in flight across every relay, and a key whose head waits for a retry
	// waits as a whole.
	Unordered bool
	// PerKey is, in ordered mode, the most records of one key a claim may
	// take: the key's head and the records right after it, in the key's
	// order, as long as each is due and no other batch holds it — a run
	// that stops at the first record that is not, so what a batch holds of
	// a key is always the key's next records with none left out. The relay
	// publishes them one after another, each after the previous one's
	// acknowledgement. Zero or one: heads only. A store may take fewer (it
	// may always take heads only); it never takes a record past one it
	// left out.
	PerKey int
	// Pipelined says, in ordered mode with PerKey above one, that the
	// relay's publisher keeps key order by itself
	// (publishers.OrderKeeper), so a key's run goes out in one call
	// rather than one record per round trip. A store may then take fewer
	// keys with longer runs, which costs it less per record, where
	// without it more keys make fewer rounds (see sqlkit.HeadLimit).
	Pipelined bool
}

// Outcome is what happened to a batch's records.
type Outcome struct {
	// Now is the relay's clock, stamped on published records.
	Now time.Time
	// Published were acknowledged by the broker.
	Published []uuid.UUID
	// DeletePublished deletes published records instead of marking them.
	DeletePublished bool
	// Retry failed and are due again at their NextAttempt; attempts+1.
	Retry []Failure
	// Dead failed for good; attempts+1. They are kept, queryable and
	// replayable, and never retried by themselves.
	Dead []Failure
}

// Failure is one failed publish.
type Failure struct {
	ID          uuid.UUID
	Err         string
	NextAttempt time.Time // for Retry only
}

// StatsParams says when Stats looks.
type StatsParams struct {
	// Now is the caller's clock: pending events due at or before Now are
	// Due, the others Scheduled.
	Now time.Time
}

// TopicStats summarizes one topic.
type TopicStats struct {
	Topic string
	// Pending counts events not yet published, due or not.
	Pending int64
	// Due counts pending events the relay may publish now; Scheduled the
	// others (a NotBefore ahead, or a retry's backoff): Due + Scheduled =
	// Pending.
	Due, Scheduled int64
	// Retrying counts pending events that failed at least once.
	Retrying int64
	// OldestPending is the CreatedAt of the oldest pending event; zero
	// when there is none.
	OldestPending time.Time
	// OldestDue is the CreatedAt of the oldest due pending event; zero
	// when there is none. Now minus OldestDue is the relay's lag: an event
	// scheduled far ahead is not lag.
	OldestDue time.Time
	// Dead counts dead events.
	Dead int64
	// Published counts published events still kept (mark mode).
	Published int64
}

// DeadParams filters Dead and DeadCount.
type DeadParams struct {
	IDs   []uuid.UUID // empty: any
	Topic string      // empty: all topics
	Key   string      // empty: any key
	// CreatedBefore keeps records created strictly before it; zero: any
	// age.
	CreatedBefore time.Time
	// After starts the page after this position (exclusive): the Cursor
	// of the previous page's last record. Nil: from the oldest. DeadCount
	// ignores it.
	After *DeadCursor
	Limit int // zero: 100; DeadCount ignores it
}

// DeadCursor is a position in the dead list, which is ordered by
// (CreatedAt, ID). Records inserted or deleted meanwhile do not shift it:
// the next page starts right after it.
type DeadCursor struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// Cursor returns r's position in the dead list, for DeadParams.After.
func (r Record) Cursor() DeadCursor { return DeadCursor{CreatedAt: r.CreatedAt, ID: r.ID} }

// BlockedParams bounds Blocked.
type BlockedParams struct {
	Limit int // zero: 100
}

// BlockedKey is a key held back by its failing head.
type BlockedKey struct {
	// Head is the key's oldest pending record: its ID, Topic, Key, Type,
	// Headers, CreatedAt, Attempts and LastError. Its Payload is not
	// read: Blocked is a status query.
	Head Record
	// NextAttempt is when the head is due again.
	NextAttempt time.Time
	// Behind counts the key's other pending records, waiting for it.
	Behind int64
}

// ReplayParams selects dead records to replay.
type ReplayParams struct {
	IDs   []uuid.UUID // empty: every dead record (of Topic, when set)
	Topic string
	Now   time.Time
}

// DiscardParams names dead records to delete.
type DiscardParams struct {
	IDs []uuid.UUID // empty: none
}

// RepublishParams selects published records to send again.
type RepublishParams struct {
	// From and To bound CreatedAt: From <= CreatedAt < To. Both are
	// required, From before To.
	From, To time.Time
	Topic    string // empty: all topics
	Key      string // empty: any key
	Now      time.Time
	Limit    int // zero: 1000
}

// DeadLetterParams selects pending records to make dead.
type DeadLetterParams struct {
	IDs    []uuid.UUID
	Reason string
}

// PurgeParams selects published and dead records to delete.
type PurgeParams struct {
	// Before bounds published records by PublishedAt; zero: none.
	Before time.Time
	// DeadBefore bounds dead records by CreatedAt; zero: none.
	DeadBefore time.Time
	Limit      int // of each kind; zero: 1000
}

// ErrBadIdentifier is returned (wrapped) for a schema or table name that is
// not a plain SQL identifier.
var ErrBadIdentifier = errors.New("not a valid SQL identifier")

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// CheckIdent returns an error unless name is a plain SQL identifier (letters,
// digits and underscores, not starting with a digit) of at most maxLen bytes.
// Stores quote identifiers as well; this check is what makes splicing them
// into SQL safe and keeps names portable across databases.
func CheckIdent(what, name string, maxLen int) error {
	if !identRE.MatchString(name) || len(name) > maxLen {
		return fmt.Errorf("%s %q: %w (letters, digits and _, at most %d bytes, not starting with a digit)", what, name, ErrBadIdentifier, maxLen)
	}
	return nil
}

// Continuer is implemented by ordered batches whose store can claim, while
// the batch is held, the records that come next for each key of the batch,
// so that a relay claims its next batch while it publishes this one.
//
// Continue claims, in a batch of its own, up to p.Limit records that follow
// the runs this batch holds (at most p.PerKey of a key, due at p.Now, none
// that another batch holds, and none past one it leaves out: each key's
// next records, with none left out). It returns a nil Batch when there is
// nothing to continue: the batch is not ordered; or its claim may have
// passed over keys that wait (it took as many keys as it could), which a
// fresh claim must reach; or none of its keys' runs took all it could, so
// the keys had nothing more (a trickle), and a fresh claim takes what
// comes next.
//
// The continuation must be published only after every record of its keys
// in this batch was published and this batch completed: a key whose record
// here failed or was deferred must not send the records that follow it.
// Before publishing it, the relay calls Resume, which makes sure the
// continuation still holds its records (its claim timeout counts from
// Resume); on an error, the relay aborts it.
type Continuer interface {
	Continue(ctx context.Context, p ClaimParams) (Batch, error)
}

// Resumer is implemented by the batches Continuer.Continue returns: see
// Continuer.
type Resumer interface {
	Resume(ctx context.Context) error
}

// TxRunner is implemented by batches whose claim is a database transaction
// (PostgreSQL: pgx.Tx; MySQL: *sql.Tx). RunInTx runs fn inside that
// transaction under a savepoint: fn's writes commit with Complete, together
// with the mark, or roll back alone when fn fails. The relay runs in-process
// handlers this way, which makes their database effects exactly-once.
type TxRunner[TTx any] interface {
	RunInTx(ctx context.Context, fn func(tx TTx) error) error
}

// TxClaimer is implemented by stores whose batches are TxRunner[TTx], so
// that relay.New can refuse in-process handlers of another transaction type
// before any event reaches them. ClaimsInTx is a marker: it is never
// called.
type TxClaimer[TTx any] interface {
	ClaimsInTx(TTx)
}

// DefaultClaimTimeout is every store's default claim timeout: how long a
// claim holds its events before another relay may take them.
const DefaultClaimTimeout = 30 * time.Second
