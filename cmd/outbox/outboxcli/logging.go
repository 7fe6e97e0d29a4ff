package outboxcli

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/outboxgo/outbox/cmd/outbox/internal/logbridge"
	"github.com/outboxgo/outbox/internal/redact"
)

// newLogger builds the logger --log-format and --log-level ask for, on
// stderr. Every message and attribute goes through the redactor, and an
// error value is logged as its text, so a multi-line error (errors.Join)
// stays on one line (quoted and escaped by either format). It also routes
// go-redis's process-wide log here (this is a main program's decision; the
// MySQL driver gets the logger per connection, see openMySQL).
func (g *globals) newLogger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", g.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch g.logFormat {
	case "text":
		h = slog.NewTextHandler(g.stderr, opts)
	case "json":
		h = slog.NewJSONHandler(g.stderr, opts)
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", g.logFormat)
	}
	log := slog.New(redactHandler{h})
	logbridge.InstallRedis(log)
	return log, nil
}

// logger is the command's logger (see newLogger).
func (g *globals) logger() *slog.Logger {
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	return g.log
}

// redactHandler hides secrets in every record before the next handler
// formats it.
type redactHandler struct{ next slog.Handler }

func (h redactHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h redactHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, redact.Text(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h redactHandler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = redactAttr(a)
	}
	return redactHandler{h.next.WithAttrs(red)}
}

func (h redactHandler) WithGroup(name string) slog.Handler {
	return redactHandler{h.next.WithGroup(name)}
}

// redactAttr is a with its strings redacted; errors and Stringers become
// their redacted text.
func redactAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, redact.Text(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, ga := range g {
			red[i] = redactAttr(ga)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, redact.Text(x.Error()))
		case fmt.Stringer:
			return slog.String(a.Key, redact.Text(x.String()))
		case []byte:
			return slog.String(a.Key, redact.Text(string(x)))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
