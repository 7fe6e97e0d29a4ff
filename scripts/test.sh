#!/usr/bin/env bash
# Runs every test of every module of the project: the README's test command.
# Arguments go to `go test` (e.g. scripts/test.sh -race -count=1). Each module
# is vetted first unless SKIP_VET=1. Tests that need a service skip, saying
# which, when it is down; with CI=true they fail instead.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t mods < <(grep -v '^#' scripts/modules.txt | grep .)
status=0
for m in "${mods[@]}"; do
  echo "== $m"
  if [ "${SKIP_VET:-}" != 1 ]; then
    (cd "$m" && go vet ./...) || { status=1; continue; }
  fi
  (cd "$m" && go test "$@" ./...) || status=1
done
exit $status
