package outboxcli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxgo/outbox/relay"
	"github.com/outboxgo/outbox/ui"
)

// defaultUIAddr is where the dashboard listens by default: loopback only.
const defaultUIAddr = "127.0.0.1:8080"

// uiTokenEnv is the dashboard's token from the environment, for every
// command that serves it.
const uiTokenEnv = "OUTBOX_UI_TOKEN"

func newUI(g *globals) *cobra.Command {
	var addr, token string
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve the web dashboard: backlog and lag over time, blocked keys, dead events to retry or discard, search",
		Long: `ui serves a web dashboard of the outbox on --addr until interrupted: the
backlog and the lag over time, the counts per topic, the keys a failing event
blocks, the dead events with Retry and Discard buttons, and a search by event
ID or key. The page updates itself every second.

It binds 127.0.0.1 by default. On any other address it needs a token
(--token, or ` + uiTokenEnv + `): open the printed URL with ?token=<token>
once, and the browser keeps it in a cookie. Its buttons are protected against
requests from other sites. 'outbox relay --ui-addr' serves the same page
beside a relay, with the relay's counters. See docs/ui.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if token == "" {
				token = os.Getenv(uiTokenEnv)
			}
			c := g.checks(cmd)
			checkUIAddr(c, "addr", addr, token, "set --token or "+uiTokenEnv)
			d, err := g.openChecked(cmd, c)
			if err != nil {
				return err
			}
			defer d.close()
			ctx := cmd.Context()
			if err := d.check(ctx); err != nil {
				return err
			}
			s, err := listenUI(ctx, "--addr", addr, &ui.Options{Store: d.store, Token: token, Title: d.where, Logger: g.logger()})
			if err != nil {
				return err
			}
			stop := s.serve(ctx, g.logger())
			defer stop()
			fmt.Fprintf(g.stdout, "outbox ui: serving the dashboard of %s at %s (Ctrl-C stops it)\n", d.where, s.url())
			<-ctx.Done()
			return nil // stopped as asked
		},
	}
	cmd.Flags().StringVar(&addr, "addr", defaultUIAddr, "host:port to serve the dashboard on; other than loopback needs --token")
	cmd.Flags().StringVar(&token, "token", "", "the token every request must carry (default "+uiTokenEnv+"); required off loopback")
	return cmd
}

// checkUIAddr checks a dashboard address flag and its token; hint says
// how to give a token.
func checkUIAddr(c *checks, flag, addr, token, hint string) {
	if err := ui.CheckBind(addr, token); err != nil {
		c.failf(flag, "%v (%s)", err, hint)
	}
}

// uiServer is a dashboard bound to its address, not yet serving.
type uiServer struct {
	dash *ui.Dashboard
	ln   net.Listener
}

// listenUI binds addr (the value of flag), so that a taken port fails at
// start in one line, and makes the dashboard of opts.
func listenUI(ctx context.Context, flag, addr string, opts *ui.Options) (*uiServer, error) {
	dash, err := ui.New(opts)
	if err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, addr, err)
	}
	return &uiServer{dash: dash, ln: ln}, nil
}

// url is the dashboard's address for a browser, without the token.
func (s *uiServer) url() string { return "http://" + s.ln.Addr().String() + "/" }

// addRelay shows r in the dashboard's Relays panel.
func (s *uiServer) addRelay(name string, r *relay.Relay) { s.dash.AddRelay(name, r.Stats) }

// serve serves the dashboard, and samples its charts, until ctx is done
// or the returned stop is called.
func (s *uiServer) serve(ctx context.Context, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	srv := &http.Server{Handler: s.dash, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{}, 2)
	go func() {
		defer func() { done <- struct{}{} }()
		if err := srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("dashboard server failed", "error", err)
		}
	}()
	go func() {
		defer func() { done <- struct{}{} }()
		_ = s.dash.Run(ctx)
	}()
	log.Info("serving the dashboard", "url", s.url())
	return func() {
		cancel()
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = srv.Shutdown(sctx)
		<-done
		<-done
	}
}
