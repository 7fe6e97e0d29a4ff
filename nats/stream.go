package nats

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox/publishers"
)

// DuplicateWindow is the duplicate window EnsureStream gives a stream:
// JetStream drops a message whose Nats-Msg-Id it stored this recently.
const DuplicateWindow = 2 * time.Minute

// ErrUnsafeSubjects is the cause of EnsureStream's refusal of a subject
// that would capture NATS's own traffic: one whose first token is a
// wildcard ('>' or '*' — '>' alone captures everything), or that lies in a
// system namespace ($JS, $SYS, $KV, … and _INBOX).
var ErrUnsafeSubjects = errors.New("the subject would capture NATS's own subjects")

// ErrSubjectsOverlap is the cause of EnsureStream's failure when another
// stream captures some of the subjects already.
var ErrSubjectsOverlap = errors.New("subjects overlap with another stream")

// EnsureStream makes sure a stream named name exists and captures subjects,
// with a duplicate window of at least DuplicateWindow. It creates the stream
// (file storage, limits retention) or adds the missing subjects and widens
// the duplicate window of an existing one, leaving its other settings alone.
// It is meant for setup (the CLI), not for the hot path.
//
// It refuses, before asking the server, a subject whose first token is a
// wildcard — ">" alone, which nats-server 2.10+ refuses and 2.9 accepts and
// then stores JetStream's API calls, advisories and _INBOX replies in the
// stream — or which lies in a system namespace (ErrUnsafeSubjects): give
// the stream a prefix of its own, such as "outbox.>". When another stream
// captures some of the subjects already, the error names it
// (ErrSubjectsOverlap). These refusals, and the server's refusal of the
// credentials or of JetStream for the account, are classified
// publishers.Misconfigured; a server that cannot be reached,
// publishers.Unavailable.
func (p *Publisher) EnsureStream(ctx context.Context, name string, subjects []string) error {
	return p.ensureStream(ctx, name, subjects, false, false)
}

// ensureStream is EnsureStream; with atomic, on a server that has atomic
// batches (2.12.1+), it also makes the stream allow atomic publish; with
// batched, on a server that has fast-ingest batches (2.14.0+), batch
// publish.
func (p *Publisher) ensureStream(ctx context.Context, name string, subjects []string, atomic, batched bool) error {
	if err := checkStreamSubjects(subjects); err != nil {
		return publishers.Misconfigured(fmt.Errorf("nats: stream %s: %w", name, err))
	}
	if testHookStreamLookup != nil {
		testHookStreamLookup()
	}
	s, err := p.js.Stream(ctx, name)
	if err == nil || errors.Is(err, jetstream.ErrStreamNotFound) {
		// The server has answered, so the connection knows its version
		// now. Asked before, while a connection retried at startup
		// (nats.RetryOnFailedConnect) or reconnected, it is unknown, and
		// the stream would be set up without the batches the server has.
		v := p.nc.ConnectedServerVersion()
		if v == "" && (atomic || batched) {
			return publishers.Unavailable(fmt.Errorf("nats: set up stream %s at %s: the connection was lost before the server's version was known", name, p.where()))
		}
		atomic = atomic && versionAtLeast(v, 2, 12, 1)
		batched = batched && versionAtLeast(v, 2, 14, 0)
	}
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		_, err = p.js.CreateStream(ctx, jetstream.StreamConfig{
			Name:       name,
			Subjects:   subjects,
			Duplicates: DuplicateWindow,
			Storage:    jetstream.FileStorage,
			Retention:  jetstream.LimitsPolicy,

			AllowAtomicPublish: atomic,
			AllowBatchPublish:  batched,
		})
		if err != nil {
			return p.streamError(ctx, "create", name, subjects, err)
		}
		return nil
	case err != nil:
		return classify(fmt.Errorf("nats: look up stream %s at %s: %w", name, p.where(), err))
	}
	cfg := s.CachedInfo().Config
	changed := false
	for _, subj := range subjects {
		if !slices.Contains(cfg.Subjects, subj) {
			cfg.Subjects = append(cfg.Subjects, subj)
			changed = true
		}
	}
	if cfg.Duplicates < DuplicateWindow {
		cfg.Duplicates = DuplicateWindow
		changed = true
	}
	if atomic && !cfg.AllowAtomicPublish {
		cfg.AllowAtomicPublish = true
		changed = true
	}
	if batched && !cfg.AllowBatchPublish {
		cfg.AllowBatchPublish = true
		changed = true
	}
	if !changed {
		return nil
	}
	if _, err := p.js.UpdateStream(ctx, cfg); err != nil {
		return p.streamError(ctx, "update", name, subjects, err)
	}
	return nil
}

// testHookStreamLookup, when set (by tests), runs before ensureStream
// looks the stream up.
var testHookStreamLookup func()

// SetupStream makes sure PublisherConfig.Stream exists and captures the
// publisher's subjects, SubjectPrefix + ".>", as EnsureStream does (and
// fails as it does); with PublisherConfig.AtomicKeyRuns, on nats-server
// 2.12.1 or later, it also makes the stream allow atomic publish
// (AllowAtomicPublish), and otherwise, unless NoKeyRuns is set, on
// nats-server 2.14.0 or later, batch publish (AllowBatchPublish), so that
// the default FastKeyRuns takes effect. It does nothing when Stream
// is empty. Call it once, after NewPublisher; opening a nats:// URL with
// stream=… through package backend does.
func (p *Publisher) SetupStream(ctx context.Context) error {
	if p.cfg.Stream == "" {
		return nil
	}
	return p.ensureStream(ctx, p.cfg.Stream, p.cfg.streamSubjects(), p.cfg.AtomicKeyRuns, p.cfg.fastRuns())
}

// streamError describes the failure to create or update stream name,
// naming the streams that hold the subjects when they overlap.
func (p *Publisher) streamError(ctx context.Context, op, name string, subjects []string, err error) error {
	var api *jetstream.APIError
	if !errors.As(err, &api) || api.ErrorCode != codeSubjectsOverlap {
		return classify(fmt.Errorf("nats: %s stream %s at %s: %w", op, name, p.where(), err))
	}
	var holders []string
	for _, subj := range subjects {
		names := p.js.StreamNames(ctx, jetstream.WithStreamListSubject(subj))
		for n := range names.Name() {
			if n != name && !slices.Contains(holders, n) {
				holders = append(holders, n)
			}
		}
	}
	held := "another stream"
	if len(holders) > 0 {
		held = "stream " + strings.Join(holders, ", ")
	}
	return publishers.Misconfigured(redacted(fmt.Errorf("nats: %s stream %s with subjects %s: %w: %s captures some of them already (%w); "+
		"give this stream subjects of its own, or use that stream", op, name, strings.Join(subjects, ", "), ErrSubjectsOverlap, held, err)))
}

// checkStreamSubjects accepts subjects a stream of outbox events may
// capture: at least one, each a valid subject, none that would capture
// NATS's own subjects.
func checkStreamSubjects(subjects []string) error {
	if len(subjects) == 0 {
		return errors.New("no subjects")
	}
	for _, s := range subjects {
		toks := strings.Split(s, ".")
		for i, tok := range toks {
			switch {
			case tok == "":
				return fmt.Errorf("subject %q: empty token", s)
			case tok == ">" && i != len(toks)-1:
				return fmt.Errorf("subject %q: '>' not last", s)
			case strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r == 0x7f }):
				return fmt.Errorf("subject %q: whitespace or control character", s)
			}
		}
		switch first := toks[0]; {
		case first == ">" || first == "*":
			return fmt.Errorf("subject %q: %w: it begins with a wildcard, so it captures JetStream's API ($JS.API.>), "+
				"advisories and request replies (_INBOX.>) too (nats-server 2.10 and later refuse it); give the stream a prefix, such as \"outbox.>\"",
				s, ErrUnsafeSubjects)
		case strings.HasPrefix(first, "$") || first == "_INBOX":
			return fmt.Errorf("subject %q: %w: %s… is a NATS system namespace", s, ErrUnsafeSubjects, first)
		}
	}
	return nil
}
