package nats

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DuplicateWindow is the duplicate window EnsureStream gives a stream:
// JetStream drops a message whose Nats-Msg-Id it stored this recently.
const DuplicateWindow = 2 * time.Minute

// EnsureStream makes sure a stream named name exists and captures subjects,
// with a duplicate window of at least DuplicateWindow. It creates the stream
// (file storage, limits retention) or adds the missing subjects and widens
// the duplicate window of an existing one, leaving its other settings alone.
// It is meant for setup (the CLI), not for the hot path.
func (p *Publisher) EnsureStream(ctx context.Context, name string, subjects []string) error {
	s, err := p.js.Stream(ctx, name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		_, err = p.js.CreateStream(ctx, jetstream.StreamConfig{
			Name:       name,
			Subjects:   subjects,
			Duplicates: DuplicateWindow,
			Storage:    jetstream.FileStorage,
			Retention:  jetstream.LimitsPolicy,
		})
		if err != nil {
			return fmt.Errorf("nats: create stream %s: %w", name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("nats: look up stream %s: %w", name, err)
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
	if !changed {
		return nil
	}
	if _, err := p.js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("nats: update stream %s: %w", name, err)
	}
	return nil
}
