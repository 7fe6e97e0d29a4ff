// Package goawstest serves goaws (github.com/Admiral-Piett/goaws v0.4.5,
// SNS and its SQS side on the query protocol, in process) to the tests of
// the SNS publisher and to the benchmarks, behind a shim of the project's
// own. goaws keeps its state in package variables, reads some of them
// without locks and lacks PublishBatch and GetTopicAttributes; the shim
// therefore
//   - passes one call at a time to goaws (goaws is not safe for
//     concurrent calls; test cases run in parallel),
//   - answers PublishBatch by calling goaws's Publish once per entry, in
//     order, and GetTopicAttributes from goaws's topics,
//   - refuses an access key other than the server's with
//     InvalidClientTokenId (goaws checks no credentials).
//
// It does not emulate FIFO topics (goaws has none: a topic named
// "x.fifo" is a standard topic, and message group and deduplication IDs
// are ignored), deduplication, or SNS's limits. goaws logs every call
// through logrus's standard logger; Start discards that logger's output.
//
// Only test code imports this package: goaws stays out of the modules of
// the project's users.
package goawstest

import (
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/Admiral-Piett/goaws/app"
	"github.com/Admiral-Piett/goaws/app/router"
	"github.com/sirupsen/logrus"
)

// Account is the account of the ARNs FanOut builds (goaws reads only a
// topic's or queue's name from an ARN).
const Account = "000000000000"

// Server is a shim in front of the process's goaws, serving on a port of
// 127.0.0.1.
type Server struct {
	// URL is the server's base URL, the SNS client's endpoint.
	URL string

	accessKey string
}

var (
	mu           sync.Mutex // one call at a time into goaws
	goawsRouter  http.Handler
	once         sync.Once
	credentialRe = regexp.MustCompile(`Credential=([^/]*)/`)
)

func initGoaws() {
	once.Do(func() {
		logrus.SetOutput(io.Discard)
		goawsRouter = router.New()
	})
}

// Start serves a shim that accepts only accessKey until t's cleanup. All
// shims share the process's one goaws: give each test its own topic and
// queue names.
func Start(t testing.TB, accessKey string) *Server {
	initGoaws()
	s := &Server{accessKey: accessKey}
	hs := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(hs.Close)
	s.URL = hs.URL
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if m := credentialRe.FindStringSubmatch(r.Header.Get("Authorization")); m == nil || m[1] != s.accessKey {
		queryError(w, http.StatusForbidden, "InvalidClientTokenId", "The security token included in the request is invalid.")
		return
	}
	if err := r.ParseForm(); err != nil {
		queryError(w, http.StatusBadRequest, "MalformedQueryString", err.Error())
		return
	}
	mu.Lock()
	defer mu.Unlock()
	switch r.Form.Get("Action") {
	case "PublishBatch":
		publishBatch(w, r.Form)
	case "GetTopicAttributes":
		arn := r.Form.Get("TopicArn")
		if topicOf(arn) == nil {
			queryError(w, http.StatusNotFound, "NotFound", "Topic does not exist")
			return
		}
		fmt.Fprintf(w, `<GetTopicAttributesResponse><GetTopicAttributesResult><Attributes><entry><key>TopicArn</key><value>%s</value></entry></Attributes></GetTopicAttributesResult><ResponseMetadata><RequestId>shim</RequestId></ResponseMetadata></GetTopicAttributesResponse>`, xmlText(arn))
	default:
		goawsRouter.ServeHTTP(w, r)
	}
}

// topicOf is goaws's topic of an ARN (its last segment), nil if none.
// mu is held.
func topicOf(arn string) *app.Topic {
	name := arn[strings.LastIndexByte(arn, ':')+1:]
	app.SyncTopics.Lock()
	defer app.SyncTopics.Unlock()
	return app.SyncTopics.Topics[name]
}

func queryError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<ErrorResponse><Error><Type>Sender</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>shim</RequestId></ErrorResponse>`, code, xmlText(msg))
}

func xmlText(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// publishBatch publishes each entry of a PublishBatch form through goaws's
// Publish, in order. mu is held.
func publishBatch(w http.ResponseWriter, f url.Values) {
	arn := f.Get("TopicArn")
	if topicOf(arn) == nil {
		queryError(w, http.StatusNotFound, "NotFound", "Topic does not exist")
		return
	}
	var ok, failed strings.Builder
	for i := 1; ; i++ {
		p := fmt.Sprintf("PublishBatchRequestEntries.member.%d.", i)
		id := f.Get(p + "Id")
		if id == "" {
			break
		}
		one := url.Values{"Action": {"Publish"}, "TopicArn": {arn}, "Message": {f.Get(p + "Message")}}
		for j := 1; ; j++ {
			a := fmt.Sprintf("%sMessageAttributes.entry.%d.", p, j)
			name := f.Get(a + "Name")
			if name == "" {
				break
			}
			b := fmt.Sprintf("MessageAttributes.entry.%d.", j)
			one.Set(b+"Name", name)
			one.Set(b+"Value.DataType", f.Get(a+"Value.DataType"))
			for _, k := range []string{"Value.StringValue", "Value.BinaryValue"} {
				if v := f.Get(a + k); v != "" {
					one.Set(b+k, v)
				}
			}
		}
		rec := serveGoaws(one)
		if rec.Code != http.StatusOK {
			fmt.Fprintf(&failed, `<member><Id>%s</Id><Code>InternalError</Code><Message>goaws: %s</Message><SenderFault>false</SenderFault></member>`,
				xmlText(id), xmlText(rec.Body.String()))
			continue
		}
		var out struct {
			MessageID string `xml:"PublishResult>MessageId"`
		}
		_ = xml.Unmarshal(rec.Body.Bytes(), &out)
		fmt.Fprintf(&ok, `<member><Id>%s</Id><MessageId>%s</MessageId></member>`, xmlText(id), xmlText(out.MessageID))
	}
	w.Header().Set("Content-Type", "text/xml")
	fmt.Fprintf(w, `<PublishBatchResponse><PublishBatchResult><Successful>%s</Successful><Failed>%s</Failed></PublishBatchResult><ResponseMetadata><RequestId>shim</RequestId></ResponseMetadata></PublishBatchResponse>`,
		ok.String(), failed.String())
}

// serveGoaws runs one query call on goaws and returns its answer. mu is
// held.
func serveGoaws(v url.Values) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(v.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	goawsRouter.ServeHTTP(rec, req)
	return rec
}

// Call runs one query call on goaws directly, failing the test unless it
// answers 200, and returns the answer's body.
func Call(t testing.TB, v url.Values) string {
	t.Helper()
	initGoaws()
	mu.Lock()
	rec := serveGoaws(v)
	mu.Unlock()
	if rec.Code != http.StatusOK {
		t.Fatalf("goaws %s: %d %s", v.Get("Action"), rec.Code, rec.Body.String())
	}
	return rec.Body.String()
}

// CreateTopic creates the topic on goaws.
func CreateTopic(t testing.TB, topic string) {
	t.Helper()
	Call(t, url.Values{"Action": {"CreateTopic"}, "Name": {topic}})
}

// FanOut creates the topic and a queue subscribed to it with raw message
// delivery (the message attributes become the SQS message's).
func FanOut(t testing.TB, topic, queue string) {
	t.Helper()
	CreateTopic(t, topic)
	Call(t, url.Values{"Action": {"CreateQueue"}, "QueueName": {queue}})
	Call(t, url.Values{"Action": {"Subscribe"}, "TopicArn": {"arn:aws:sns:us-east-1:" + Account + ":" + topic},
		"Protocol": {"sqs"}, "Endpoint": {"arn:aws:sqs:us-east-1:" + Account + ":" + queue},
		"Attributes.entry.1.key": {"RawMessageDelivery"}, "Attributes.entry.1.value": {"true"}})
}

// Message is a message of goaws's SQS side, as read through goaws's own
// state.
type Message struct {
	Body  string
	Attrs map[string]string // decoded: a Binary attribute's bytes
}

// QueueMessages returns what goaws's queue holds, in order.
func QueueMessages(t testing.TB, queue string) []Message {
	t.Helper()
	initGoaws()
	mu.Lock()
	defer mu.Unlock()
	app.SyncQueues.Lock()
	defer app.SyncQueues.Unlock()
	q := app.SyncQueues.Queues[queue]
	if q == nil {
		return nil
	}
	out := make([]Message, len(q.Messages))
	for i, m := range q.Messages {
		out[i] = Message{Body: string(m.MessageBody), Attrs: map[string]string{}}
		for k, a := range m.MessageAttributes {
			v := a.Value
			if a.ValueKey == "BinaryValue" {
				b, err := base64.StdEncoding.DecodeString(v)
				if err != nil {
					t.Errorf("attribute %s: %v", k, err)
				}
				v = string(b)
			}
			out[i].Attrs[k] = v
		}
	}
	return out
}
