package pubsub_test

import (
	"context"
	"testing"

	gpubsub "cloud.google.com/go/pubsub/v2"
	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// fakeProject is the project of the in-process fake.
const fakeProject = "fake"

// fake is Google's in-process Pub/Sub fake with a client of it, both
// closed at cleanup.
type fake struct {
	srv    *pstest.Server
	client *gpubsub.Client
}

// newFake starts a fake with the topic prefix+topic; its Publish answers
// with react first (nil: none).
func newFake(t *testing.T, topicID string, react func(*pb.PublishRequest) error) *fake {
	t.Helper()
	var opts []pstest.ServerReactorOption
	if react != nil {
		opts = append(opts, pstest.ServerReactorOption{FuncName: "Publish", Reactor: reactor(react)})
	}
	srv := pstest.NewServer(opts...)
	t.Cleanup(func() { _ = srv.Close() })
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	c, err := gpubsub.NewClient(context.Background(), fakeProject, option.WithGRPCConn(conn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(); _ = conn.Close() })
	if _, err := c.TopicAdminClient.CreateTopic(context.Background(), &pb.Topic{Name: "projects/" + fakeProject + "/topics/" + topicID}); err != nil {
		t.Fatal(err)
	}
	return &fake{srv: srv, client: c}
}

// reactor fails a Publish request with the error the function returns for
// it; nil lets the fake handle it.
type reactor func(*pb.PublishRequest) error

func (r reactor) React(req any) (bool, any, error) {
	if err := r(req.(*pb.PublishRequest)); err != nil {
		return true, &pb.PublishResponse{}, err
	}
	return false, nil, nil
}

// invalid is an InvalidArgument status, as Pub/Sub refuses a request
// (a message against the topic's schema).
func invalid(msg string) error { return status.Error(codes.InvalidArgument, msg) }
