package pubsub

import (
	"context"
	"fmt"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// reconnect is how the client's connections come back after an outage:
// gRPC's default backoff grows to 2 minutes between attempts, which would
// keep a relay idle long after Pub/Sub is back.
var reconnect = grpc.ConnectParams{
	Backoff: backoff.Config{
		BaseDelay:  200 * time.Millisecond,
		Multiplier: 1.6,
		Jitter:     0.2,
		MaxDelay:   5 * time.Second,
	},
	MinConnectTimeout: 5 * time.Second,
}

// newClient makes a client of project: credentials and endpoint as
// Google's libraries find them (Application Default Credentials, or the
// emulator at PUBSUB_EMULATOR_HOST), then opts.
func newClient(ctx context.Context, project string, opts []option.ClientOption) (*gpubsub.Client, error) {
	all := append([]option.ClientOption{option.WithGRPCDialOption(grpc.WithConnectParams(reconnect))}, opts...)
	// Detached: the credentials may refresh tokens with it long after
	// NewPublisher returned.
	c, err := gpubsub.NewClient(context.WithoutCancel(ctx), project, all...)
	if err != nil {
		// No credentials found, or options that cannot work: a
		// configuration to fix, not an outage.
		return nil, misconfigured(fmt.Errorf("pubsub: new client of project %q: %w", project, err))
	}
	return c, nil
}
