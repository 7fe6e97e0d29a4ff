#!/usr/bin/env bash
# Checks that the modules stay lean: a fresh user module importing only the
# core, the relay, PostgreSQL and NATS must not list any Kafka, RabbitMQ,
# Redis, MySQL, SQLite, Google or AWS module in `go list -m all`. It prints
# the module count. The user module points at this checkout with replaces,
# as a user's module would fetch the same versions from the proxy.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
cat > main.go <<'GO'
package main

import (

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/relay"
)

var (
	_ outbox.Message
	_ = relay.New
	_ = postgres.New
	_ = nats.NewPublisher
)

func main() {}
GO
go mod init example.com/user >/dev/null 2>&1
for m in . postgres nats; do
  p=github.com/outboxgo/outbox; [ "$m" = . ] || p=$p/$m
  go mod edit -require="$p@v0.1.0" -replace="$p@v0.1.0=$root/$m"
done
# The replaced modules' own requirements on siblings need the same pointers.
for m in $(grep -v '^#' "$root/scripts/modules.txt" | grep .); do
  p=github.com/outboxgo/outbox; [ "$m" = . ] || p=$p/$m
  go mod edit -replace="$p@v0.1.0=$root/$m"
done
GOWORK=off GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || GOWORK=off GOFLAGS=-mod=mod go mod tidy
GOWORK=off go build ./...
all=$(GOWORK=off go list -m all)
echo "modcheck: a PostgreSQL + NATS user module lists $(echo "$all" | wc -l) modules"
bad=$(echo "$all" | grep -Ei 'franz-go|kfake|amqp|rabbitmq|go-redis|redis/|go-sql-driver|mysql|sqlite|modernc|cloud\.google|google\.golang\.org/api|aws' || true)
if [ -n "$bad" ]; then
  echo "modcheck: modules a PostgreSQL + NATS user must not get:"; echo "$bad"; exit 1
fi
