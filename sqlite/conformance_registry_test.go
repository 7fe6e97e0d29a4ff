package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/backend/backendtest"
)

func TestRegistryConformance(t *testing.T) {
	backendtest.Database(t, backendtest.DatabaseHarness{
		New: func(t *testing.T) (string, *backend.DatabaseOptions) {
			return "sqlite:" + filepath.Join(t.TempDir(), "app.db"), &backend.DatabaseOptions{}
		},
		Unreachable: "sqlite://user:" + backendtest.Secret + "@host/app.db",
	})
}
