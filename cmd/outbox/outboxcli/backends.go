package outboxcli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/internal/redact"

	// The backends the command line offers, each registering its URL
	// schemes: adding one is adding a line here.
	_ "github.com/outboxgo/outbox/kafka"
	_ "github.com/outboxgo/outbox/mqtt"
	_ "github.com/outboxgo/outbox/mysql"
	_ "github.com/outboxgo/outbox/nats"
	_ "github.com/outboxgo/outbox/postgres"
	_ "github.com/outboxgo/outbox/pubsub"
	_ "github.com/outboxgo/outbox/rabbitmq"
	_ "github.com/outboxgo/outbox/redis"
	_ "github.com/outboxgo/outbox/sidekiq"
	_ "github.com/outboxgo/outbox/sns"
	_ "github.com/outboxgo/outbox/sqlite"
	_ "github.com/outboxgo/outbox/sqs"
	_ "github.com/outboxgo/outbox/webhook"
)

// paramFlag is a broker URL parameter offered as a flag: --subject-prefix
// sets subject_prefix, overriding the URL's.
type paramFlag struct {
	param   string
	brokers []string // the names of the brokers that read it
	value   string
	changed bool // given, on the command line or by its variable
}

// paramFlags makes a flag of every registered broker's URL parameter that
// asks for one (backend.Param.Flag), one per name, and returns them by flag
// name.
func paramFlags(fl *pflag.FlagSet) map[string]*paramFlag {
	out := map[string]*paramFlag{}
	usage := map[string][]string{}
	for _, b := range backend.Brokers() {
		for _, p := range b.Params {
			if !p.Flag || redact.SecretKey(p.Name) {
				continue // the rest by URL; a secret on a command line shows in ps
			}
			name := strings.ReplaceAll(p.Name, "_", "-")
			pf := out[name]
			if pf == nil {
				pf = &paramFlag{param: p.Name}
				out[name] = pf
			}
			pf.brokers = append(pf.brokers, b.Name)
			u := b.Name + ": " + p.Usage
			if p.Default != "" {
				u += " (default " + p.Default + ")"
			}
			usage[name] = append(usage[name], u)
		}
	}
	names := make([]string, 0, len(out))
	for n := range out {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fl.StringVar(&out[n].value, n, "", "sets the broker URL's "+out[n].param+" parameter; "+strings.Join(usage[n], "; "))
	}
	return out
}

// forms returns a backend's URL forms for help, or its schemes.
func forms(fs, schemes []string) []string {
	if len(fs) > 0 {
		return fs
	}
	out := make([]string, len(schemes))
	for i, s := range schemes {
		out[i] = s + "://…"
	}
	return out
}

// brokerHelp lists the registered brokers for --help.
func brokerHelp() string {
	var b strings.Builder
	for _, br := range backend.Brokers() {
		fs := forms(br.Forms, br.Schemes)
		for _, f := range fs[:len(fs)-1] {
			fmt.Fprintf(&b, "  %s\n", f)
		}
		fmt.Fprintf(&b, "  %-38s %s\n", fs[len(fs)-1], br.Name)
		for _, p := range br.Params {
			line := p.Usage
			if p.Default != "" {
				line += " (default " + p.Default + ")"
			}
			if p.Flag {
				line += "; --" + strings.ReplaceAll(p.Name, "_", "-")
			}
			// No "=": the help goes through the redactor, which would
			// take the usage of a secret-sounding name for its value.
			fmt.Fprintf(&b, "      %-22s %s\n", p.Name, line)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// databaseHelp lists the registered databases for --help.
func databaseHelp() string {
	var b strings.Builder
	for _, d := range backend.Databases() {
		fs := forms(d.Forms, d.Schemes)
		for _, f := range fs[:len(fs)-1] {
			fmt.Fprintf(&b, "  %s\n", f)
		}
		fmt.Fprintf(&b, "  %-38s %s\n", fs[len(fs)-1], d.Name)
		for _, p := range d.Params {
			fmt.Fprintf(&b, "      %-22s %s\n", p.Name, p.Usage)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}
