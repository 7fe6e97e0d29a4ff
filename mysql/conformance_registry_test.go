package mysql_test

import (
	"testing"

	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/backend/backendtest"
)

func TestRegistryConformance(t *testing.T) {
	backendtest.Database(t, backendtest.DatabaseHarness{
		New: func(t *testing.T) (string, *backend.DatabaseOptions) {
			u, _ := testURL(t, "") // a database of the test's own
			return u, &backend.DatabaseOptions{}
		},
		Unreachable: "mysql://root:" + backendtest.Secret + "@127.0.0.1:1/test",
	})
}
