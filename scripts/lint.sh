#!/usr/bin/env bash
# Lints every module with golangci-lint (the version .ci/run installs;
# configuration in .golangci.yml) and checks gofmt. Arguments go to
# golangci-lint run (e.g. --fix).
set -euo pipefail
cd "$(dirname "$0")/.."
lint=${GOLANGCI_LINT:-$(go env GOPATH)/bin/golangci-lint}
mapfile -t mods < <(grep -v '^#' scripts/modules.txt | grep .)
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
status=0
for m in "${mods[@]}"; do
  (cd "$m" && "$lint" run --config "$OLDPWD/.golangci.yml" "$@" ./...) || status=1
done
exit $status
