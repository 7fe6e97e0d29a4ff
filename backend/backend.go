package backend

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/stores"
)

// Param is a URL query parameter a backend understands.
type Param struct {
	// Name is the parameter as it appears in the URL (subject_prefix).
	Name string
	// Default is the value used when the URL leaves it out, as text ("" for
	// none).
	Default string
	// Usage says what it does, in one line.
	Usage string
	// Flag asks tools to offer it as a flag of the same name, dashes for
	// underscores (the CLI's --stream for stream), for the few settings
	// one changes per run. Every parameter is in the URL either way.
	Flag bool
}

// Database is a database backend.
type Database struct {
	// Name is how messages name it: "PostgreSQL".
	Name string
	// Schemes are the URL schemes it serves: "postgres", "postgresql".
	Schemes []string
	// Forms are its URL forms, for help texts:
	// "postgres://user:pass@host:5432/db".
	Forms []string
	// Params are the URL parameters it reads beyond the driver's own.
	Params []Param
	// Validate checks a URL's form without connecting. Nil: Open checks.
	Validate func(rawURL string) error
	// Open connects to the database the URL names and checks that it
	// answers. Errors name the database by its redacted URL.
	Open func(ctx context.Context, rawURL string, o *DatabaseOptions) (DB, error)
	// SchemaSQL is the SQL that Migrate runs, for teams that migrate with
	// their own tool (goose, golang-migrate, atlas).
	SchemaSQL func(o *DatabaseOptions) (string, error)
}

// DatabaseOptions are what every database takes beyond its URL. Zero
// means the default, for every field.
type DatabaseOptions struct {
	// Schema and Table name the outbox table: Schema.Table where the
	// database has schemas (PostgreSQL), Schema_Table where it has not.
	// Default "outbox" and "messages".
	Schema, Table string
	// ClaimTimeout is how long a claim holds its events (the store's
	// default when zero).
	ClaimTimeout time.Duration
	// Create lets Open create a database that does not exist yet (a SQLite
	// file); only migrations should.
	Create bool
	// Logger receives the backend's own logs. Default: discarded.
	Logger *slog.Logger
	// Application names the connections where the database shows a name
	// (PostgreSQL's application_name), unless the URL names them itself:
	// "outbox relay <host> pid <pid>" lets the dashboard see the relay
	// (stores.SessionLister). Empty: the driver's default.
	Application string
}

// Defaults for DatabaseOptions.
const (
	DefaultSchema = "outbox"
	DefaultTable  = "messages"
)

// WithDefaults returns a copy of o (which may be nil) with every zero
// field set to its default.
func (o *DatabaseOptions) WithDefaults() DatabaseOptions {
	var out DatabaseOptions
	if o != nil {
		out = *o
	}
	if out.Schema == "" {
		out.Schema = DefaultSchema
	}
	if out.Table == "" {
		out.Table = DefaultTable
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out
}

// DB is an opened database, as tools see it.
type DB interface {
	// Store is the relay's store of the outbox table.
	Store() stores.Store
	// Table is the outbox table as the database names it:
	// outbox.messages, outbox_messages.
	Table() string
	// CheckSchema returns outbox.ErrSchemaMissing (wrapped) when the
	// outbox table does not exist.
	CheckSchema(ctx context.Context) error
	// Migrate brings the outbox table and the inbox table to the latest
	// schema version.
	Migrate(ctx context.Context) error
	// SchemaVersions reports where each of those tables stands.
	SchemaVersions(ctx context.Context) ([]stores.SchemaVersion, error)
	// Close releases the connections.
	Close() error
}

// Broker is a broker backend.
type Broker struct {
	// Name is how messages name it: "NATS".
	Name string
	// Schemes are the URL schemes it serves: "nats".
	Schemes []string
	// Forms are its URL forms, for help texts: "nats://host:4222".
	Forms []string
	// Params are the URL parameters it reads.
	Params []Param
	// Validate checks a URL's form and parameters without connecting.
	// Nil: Open checks.
	Validate func(rawURL string) error
	// Open returns a publisher to the broker the URL names, ready to
	// publish: it creates what the URL asks for (a NATS stream). The
	// caller checks the credentials with publishers.Checker.
	Open func(ctx context.Context, rawURL string, o *BrokerOptions) (publishers.Publisher, error)
}

// BrokerOptions are what every broker takes beyond its URL.
type BrokerOptions struct {
	// Logger receives the publisher's logs. Default: discarded.
	Logger *slog.Logger
}

// WithDefaults returns a copy of o (which may be nil) with every zero
// field set to its default.
func (o *BrokerOptions) WithDefaults() BrokerOptions {
	var out BrokerOptions
	if o != nil {
		out = *o
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out
}

var registry struct {
	sync.RWMutex
	databases map[string]Database
	brokers   map[string]Broker
}

// RegisterDatabase makes d available under each of its schemes. It panics
// when a scheme is taken or d lacks Name, Schemes or Open: a programming
// error, found at init.
func RegisterDatabase(d Database) {
	if d.Name == "" || len(d.Schemes) == 0 || d.Open == nil {
		panic("backend: RegisterDatabase needs Name, Schemes and Open")
	}
	registry.Lock()
	defer registry.Unlock()
	if registry.databases == nil {
		registry.databases = map[string]Database{}
	}
	for _, s := range d.Schemes {
		if _, dup := registry.databases[s]; dup {
			panic("backend: database scheme " + s + " registered twice")
		}
		registry.databases[s] = d
	}
}

// RegisterBroker makes b available under each of its schemes. It panics
// when a scheme is taken or b lacks Name, Schemes or Open.
func RegisterBroker(b Broker) {
	if b.Name == "" || len(b.Schemes) == 0 || b.Open == nil {
		panic("backend: RegisterBroker needs Name, Schemes and Open")
	}
	registry.Lock()
	defer registry.Unlock()
	if registry.brokers == nil {
		registry.brokers = map[string]Broker{}
	}
	for _, s := range b.Schemes {
		if _, dup := registry.brokers[s]; dup {
			panic("backend: broker scheme " + s + " registered twice")
		}
		registry.brokers[s] = b
	}
}

// Databases returns the registered databases, each once, by name.
func Databases() []Database {
	registry.RLock()
	defer registry.RUnlock()
	return unique(registry.databases, func(d Database) string { return d.Name })
}

// Brokers returns the registered brokers, each once, by name.
func Brokers() []Broker {
	registry.RLock()
	defer registry.RUnlock()
	return unique(registry.brokers, func(b Broker) string { return b.Name })
}

func unique[T any](m map[string]T, name func(T) string) []T {
	seen := map[string]bool{}
	var out []T
	for _, v := range m {
		if n := name(v); !seen[n] {
			seen[n] = true
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return name(out[i]) < name(out[j]) })
	return out
}

// DatabaseSchemes and BrokerSchemes list the registered schemes, sorted.
func DatabaseSchemes() []string {
	registry.RLock()
	defer registry.RUnlock()
	return keys(registry.databases)
}

// BrokerSchemes lists the registered broker schemes, sorted.
func BrokerSchemes() []string {
	registry.RLock()
	defer registry.RUnlock()
	return keys(registry.brokers)
}

func keys[T any](m map[string]T) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// LookupDatabase returns the database of rawURL's scheme, or an error that
// names the URL (redacted) and the schemes there are.
func LookupDatabase(rawURL string) (Database, error) {
	registry.RLock()
	defer registry.RUnlock()
	return lookup(registry.databases, "database", rawURL)
}

// LookupBroker returns the broker of rawURL's scheme, or an error that names
// the URL (redacted) and the schemes there are.
func LookupBroker(rawURL string) (Broker, error) {
	registry.RLock()
	defer registry.RUnlock()
	return lookup(registry.brokers, "broker", rawURL)
}

func lookup[T any](m map[string]T, what, rawURL string) (T, error) {
	var zero T
	known := keys(m)
	if len(known) == 0 {
		return zero, fmt.Errorf("no %s backend is registered: import one (github.com/outboxgo/outbox/postgres, …)", what)
	}
	sch := Scheme(rawURL)
	if sch == "" {
		return zero, fmt.Errorf("%s: not a URL (want %s://…)", redact.URL(rawURL), strings.Join(known, "://…, "))
	}
	v, ok := m[sch]
	if !ok {
		return zero, fmt.Errorf("%s: unsupported scheme %q (want %s)", redact.URL(rawURL), sch, strings.Join(known, ", "))
	}
	return v, nil
}

// Scheme returns rawURL's scheme, lower-cased, or "" when it has none.
func Scheme(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		// A URL with a bad part still has a readable scheme.
		if i := strings.Index(rawURL, ":"); i > 0 && !strings.ContainsAny(rawURL[:i], "/?#@") {
			return strings.ToLower(rawURL[:i])
		}
		return ""
	}
	return strings.ToLower(u.Scheme)
}

// OpenDatabase opens the database rawURL names with the backend registered
// for its scheme.
func OpenDatabase(ctx context.Context, rawURL string, o *DatabaseOptions) (DB, error) {
	d, err := LookupDatabase(rawURL)
	if err != nil {
		return nil, err
	}
	if d.Validate != nil {
		if err := d.Validate(rawURL); err != nil {
			return nil, err
		}
	}
	opts := o.WithDefaults()
	return d.Open(ctx, rawURL, &opts)
}

// OpenBroker opens a publisher to the broker rawURL names with the backend
// registered for its scheme.
func OpenBroker(ctx context.Context, rawURL string, o *BrokerOptions) (publishers.Publisher, error) {
	b, err := LookupBroker(rawURL)
	if err != nil {
		return nil, err
	}
	if b.Validate != nil {
		if err := b.Validate(rawURL); err != nil {
			return nil, err
		}
	}
	opts := o.WithDefaults()
	return b.Open(ctx, rawURL, &opts)
}

// ApplyParams returns rawURL with the query parameters in set replacing
// the URL's own: how flags override a URL. Parameters not in set are kept
// as they are; an empty set returns rawURL unchanged. In a comma-separated
// list of URLs (nats://a:4222?stream=X,nats://b:4222) each element loses
// the parameters set replaces, and the last one gets them.
func ApplyParams(rawURL string, set map[string]string) (string, error) {
	if len(set) == 0 {
		return rawURL, nil
	}
	els := splitList(rawURL)
	for i, el := range els {
		u, err := url.Parse(el)
		if err != nil {
			return "", fmt.Errorf("URL %s: %s", redact.URL(rawURL), redact.Text(err.Error()))
		}
		q := u.Query()
		for k, v := range set {
			if i == len(els)-1 {
				q.Set(k, v)
			} else {
				q.Del(k)
			}
		}
		u.RawQuery = q.Encode()
		els[i] = u.String()
	}
	return strings.Join(els, ","), nil
}

// splitList splits a comma-separated list of URLs where a comma starts a
// new URL (one with a scheme); commas between hosts of one authority
// (kafka://h1:9092,h2:9092) stay inside it.
func splitList(rawURL string) []string {
	parts := strings.Split(rawURL, ",")
	out := []string{parts[0]}
	for _, p := range parts[1:] {
		if Scheme(p) != "" && strings.Contains(p, "://") {
			out = append(out, p)
		} else {
			out[len(out)-1] += "," + p
		}
	}
	return out
}
