package faults

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"
	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// envGcloud is the gcloud binary that runs the Pub/Sub emulator (default:
// $PATH).
const envGcloud = "OUTBOX_FAULTS_GCLOUD"

// pubsubEmulator is a private Google Pub/Sub emulator (gcloud beta
// emulators pubsub start, Java) on a free port of 127.0.0.1 with a data
// directory of its own: never the shared one on 127.0.0.1:8085, which
// other tests use. gcloud starts the emulator as a java child and leaves it
// running when gcloud alone is stopped, so the emulator runs in a process
// group of its own and kill SIGKILLs the whole group: a crash. The
// emulator keeps everything in memory; a restart begins empty.
type pubsubEmulator struct {
	bin, dir string
	port     int
	cmd      *exec.Cmd
}

// startPubsubEmulator starts a private emulator, killed and removed at
// cleanup. It returns an error (the caller decides) when that is not
// possible here.
func startPubsubEmulator(t testing.TB) (*pubsubEmulator, error) {
	t.Helper()
	bin := os.Getenv(envGcloud)
	if bin == "" {
		p, err := exec.LookPath("gcloud")
		if err != nil {
			return nil, fmt.Errorf("no gcloud (set %s): %w", envGcloud, err)
		}
		bin = p
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "outbox-faults-pubsub-")
	if err != nil {
		return nil, err
	}
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	e := &pubsubEmulator{bin: bin, dir: dir, port: port}
	t.Cleanup(func() {
		e.kill()
		_ = os.RemoveAll(dir)
	})
	if err := e.start(); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *pubsubEmulator) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(e.port)) }

// start starts the emulator on its port and waits until it answers an
// admin call (about 10 s on a quiet machine; the deadline is 2 minutes for
// a loaded one).
func (e *pubsubEmulator) start() error {
	logf, err := os.OpenFile(filepath.Join(e.dir, "emulator.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(e.bin, "beta", "emulators", "pubsub", "start",
		"--host-port="+e.addr(), "--data-dir="+filepath.Join(e.dir, "data"), "--quiet")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the Pub/Sub emulator: %w", err)
	}
	e.cmd = cmd
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	c, err := e.client(context.Background(), "outbox-faults-probe")
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		// A topic that does not exist: NotFound is the emulator answering.
		_, err := c.TopicAdminClient.GetTopic(ctx, &pb.GetTopicRequest{Topic: "projects/outbox-faults-probe/topics/probe"})
		cancel()
		if status.Code(err) == codes.NotFound {
			return nil
		}
		select {
		case werr := <-exited:
			return fmt.Errorf("the Pub/Sub emulator exited at start (%v); its log:\n%s", werr, e.logTail())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Pub/Sub emulator does not answer on %s after 2m (%v); its log:\n%s", e.addr(), err, e.logTail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// kill SIGKILLs the emulator's process group (gcloud and its java child)
// and waits until the port is free again.
func (e *pubsubEmulator) kill() {
	if e.cmd == nil {
		return
	}
	_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
	e.cmd = nil
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", e.addr(), time.Second)
		if err != nil {
			return
		}
		_ = c.Close()
		time.Sleep(50 * time.Millisecond)
	}
}

// client is a client of project on the emulator itself, reconnecting
// within a second of the emulator's return.
func (e *pubsubEmulator) client(ctx context.Context, project string) (*gpubsub.Client, error) {
	return pubsubClientAt(ctx, e.addr(), project)
}

// pubsubClientAt is a client of project on the emulator at addr (the
// emulator itself, or a proxy in front of it), reconnecting within a
// second of the emulator's return.
func pubsubClientAt(ctx context.Context, addr, project string) (*gpubsub.Client, error) {
	return gpubsub.NewClient(ctx, project,
		option.WithEndpoint(addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
		option.WithGRPCDialOption(grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 2 * time.Second,
		})))
}

// logTail is the end of the emulator's log, for an error.
func (e *pubsubEmulator) logTail() string {
	b, err := os.ReadFile(filepath.Join(e.dir, "emulator.log"))
	if err != nil {
		return err.Error()
	}
	if len(b) > 4<<10 {
		b = b[len(b)-4<<10:]
	}
	return string(b)
}
