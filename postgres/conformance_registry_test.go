package postgres_test

import (
	"testing"

	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/backend/backendtest"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
)

func TestRegistryConformance(t *testing.T) {
	backendtest.Database(t, backendtest.DatabaseHarness{
		New: func(t *testing.T) (string, *backend.DatabaseOptions) {
			return pgtest.URL(), &backend.DatabaseOptions{Schema: pgtest.Schema(t, pgtest.Pool(t))}
		},
		Unreachable: "postgres://bob:" + backendtest.Secret + "@127.0.0.1:1/app",
	})
}
