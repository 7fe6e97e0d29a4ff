package sns_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/sns"
)

// TestFIFOEntries: on a FIFO topic (which goaws lacks, so a recorder
// answers here) each entry carries the key's group (the topic's for an
// unkeyed event, a hash for a key SNS refuses) and the event ID as its
// deduplication ID; batches hold at most 10 entries and a key's batches go
// one after the other.
func TestFIFOEntries(t *testing.T) {
	var mu sync.Mutex
	var forms []url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		mu.Lock()
		forms = append(forms, r.Form)
		mu.Unlock()
		var ok strings.Builder
		for i := 1; r.Form.Get(fmt.Sprintf("PublishBatchRequestEntries.member.%d.Id", i)) != ""; i++ {
			fmt.Fprintf(&ok, "<member><Id>%s</Id><MessageId>m%d</MessageId><SequenceNumber>%d</SequenceNumber></member>",
				r.Form.Get(fmt.Sprintf("PublishBatchRequestEntries.member.%d.Id", i)), i, i)
		}
		fmt.Fprintf(w, "<PublishBatchResponse><PublishBatchResult><Successful>%s</Successful><Failed></Failed></PublishBatchResult></PublishBatchResponse>", ok.String())
	}))
	t.Cleanup(srv.Close)
	p, err := sns.NewPublisher(context.Background(), &sns.PublisherConfig{Region: "eu-west-1", Account: testAccount,
		Endpoint: srv.URL, Credentials: creds, TopicPrefix: "orders-", FIFO: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	var msgs []outbox.Message
	for i := range 25 {
		msgs = append(msgs, outbox.Message{ID: outbox.NewID(), Topic: "placed", Key: "order-1", Payload: []byte("p")})
		if i%5 == 0 {
			msgs = append(msgs, outbox.Message{ID: outbox.NewID(), Topic: "placed", Key: "with space", Payload: []byte("p")},
				outbox.Message{ID: outbox.NewID(), Topic: "placed", Payload: []byte("p")})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, err := range p.Publish(ctx, msgs) {
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	byID := map[string]outbox.Message{}
	for _, m := range msgs {
		byID[m.ID.String()] = m
	}
	var order []string // order-1's IDs in the order sent
	seen := 0
	for _, f := range forms {
		if got := f.Get("TopicArn"); got != "arn:aws:sns:eu-west-1:"+testAccount+":orders-placed.fifo" {
			t.Fatalf("TopicArn %q", got)
		}
		for i := 1; ; i++ {
			e := fmt.Sprintf("PublishBatchRequestEntries.member.%d.", i)
			dedup := f.Get(e + "MessageDeduplicationId")
			if f.Get(e+"Id") == "" {
				if i > 11 {
					t.Fatalf("a batch of %d entries", i-1)
				}
				break
			}
			seen++
			m, ok := byID[dedup]
			if !ok {
				t.Fatalf("entry with deduplication ID %q, not an event ID", dedup)
			}
			want := m.Key
			switch m.Key {
			case "":
				want = "placed"
			case "with space":
				want = sns.GroupID("with space")
				if !strings.HasPrefix(want, "sha256-") {
					t.Fatalf("GroupID(with space) = %q", want)
				}
			case "order-1":
				order = append(order, dedup)
			}
			if got := f.Get(e + "MessageGroupId"); got != want {
				t.Fatalf("event %s key %q: group %q, want %q", dedup, m.Key, got, want)
			}
		}
	}
	if seen != len(msgs) {
		t.Fatalf("%d entries sent, want %d", seen, len(msgs))
	}
	var want []string
	for _, m := range msgs {
		if m.Key == "order-1" {
			want = append(want, m.ID.String())
		}
	}
	if strings.Join(order, ",") != strings.Join(want, ",") {
		t.Fatal("order-1's events were sent out of order")
	}
}
