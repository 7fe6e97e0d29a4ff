package metrics_test

import (
	"os/exec"
	"testing"

	"github.com/outboxgo/outbox/internal/testenv"
)

// promtool, where it is installed (Debian's prometheus package), checks
// that alerts.yml parses as Prometheus parses it, and that each alert fires
// (and stays quiet) on the series of alerts_test.yml.
func TestAlertRulesPromtool(t *testing.T) {
	bin, err := exec.LookPath("promtool")
	if err != nil {
		testenv.Unreachable(t, "promtool (Debian: prometheus)", err)
	}
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = "../docs/grafana"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}
