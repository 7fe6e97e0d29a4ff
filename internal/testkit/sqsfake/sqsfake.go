// Package sqsfake is a small in-process server that speaks the part of
// Amazon SQS's AWS JSON 1.0 protocol the sqs package uses, for its tests
// and benchmarks. It is the project's own code, written from AWS's API
// reference and from what the SDK's deserializers parse; it is no
// emulator of SQS.
//
// The protocol: every call is POST / with X-Amz-Target:
// AmazonSQS.<Action> and Content-Type: application/x-amz-json-1.0, a JSON
// request body and a JSON response body; an error is a 4xx or 5xx with
// {"__type":"com.amazonaws.sqs#<Code>","message":"…"} and, as SQS sends it
// for clients of the older query protocol, the header x-amzn-query-error:
// <QueryCode>;Sender (the SDK reports that code from ErrorCode()).
//
// Implemented: CreateQueue, GetQueueUrl, ListQueues, GetQueueAttributes
// (the message counts), SendMessage, SendMessageBatch, ReceiveMessage (long
// polling, VisibilityTimeout, ApproximateReceiveCount, message
// attributes), ChangeMessageVisibility, DeleteMessage and
// DeleteMessageBatch; FIFO queues (at most one message of a group in
// flight, the groups' order, the 5-minute deduplication window on
// MessageDeduplicationId); and a refusal of unknown access keys.
//
// Not checked: request signatures (only the access key of the
// Authorization header is read), IAM policies, queue attributes beyond
// FifoQueue and VisibilityTimeout, limits other than the 10 entries of a
// batch, the 10 message attributes and the message size
// (Options.MaxMessageSize); no redrive policy of its own, no delay
// queues, no message retention.
package sqsfake

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Account is the account ID in the fake's queue URLs.
const Account = "000000000000"

// DedupWindow is how long a FIFO queue remembers a deduplication ID.
const DedupWindow = 5 * time.Minute

// Options configure a Server.
type Options struct {
	// AccessKeys, when not empty, are the only access key IDs the server
	// accepts; any other is refused with InvalidClientTokenId (HTTP 403).
	AccessKeys []string
	// MaxMessageSize is the largest body plus attributes accepted, in
	// bytes. Default 262144 (256 KiB).
	MaxMessageSize int
	// FailEntry, when set, is asked about each entry of a SendMessageBatch
	// before it is stored: a non-empty code fails the entry with that code
	// and senderFault, unstored, for tests of per-entry failures.
	FailEntry func(body string) (code string, senderFault bool)
}

// Server is the fake. Its methods are safe for concurrent use.
type Server struct {
	opts Options

	mu     sync.Mutex
	queues map[string]*queue
	wake   chan struct{} // closed and replaced whenever a message may have become receivable
	seq    int64
	calls  map[string]int
}

type queue struct {
	name       string
	fifo       bool
	visibility time.Duration
	msgs       []*message // in send order, deleted ones removed
	dedup      map[string]dedupEntry
	// dedupOrder are the deduplication IDs in the order they entered
	// dedup, so that expiring them costs what expires, not the window.
	dedupOrder []string
}

type dedupEntry struct {
	at time.Time
	id string
}

type message struct {
	id, body, md5 string
	attrs         map[string]Attribute
	group, dedup  string
	seq           int64
	sent          time.Time
	visibleAt     time.Time
	receives      int
	receipt       string
}

// Attribute is a message attribute as the JSON protocol carries it; Binary
// is the decoded BinaryValue.
type Attribute struct {
	DataType    string `json:"DataType"`
	StringValue string `json:"StringValue,omitempty"`
	BinaryValue []byte `json:"BinaryValue,omitempty"`
}

// Message is a snapshot of a stored message.
type Message struct {
	ID, Body       string
	Attributes     map[string]Attribute
	GroupID        string
	DedupID        string
	ReceiveCount   int
	InFlight       bool
	SequenceNumber int64
}

// New returns a server with no queues.
func New(o Options) *Server {
	if o.MaxMessageSize == 0 {
		o.MaxMessageSize = 256 << 10
	}
	return &Server{opts: o, queues: map[string]*queue{}, wake: make(chan struct{}), calls: map[string]int{}}
}

// CreateQueue creates a queue (a FIFO queue when name ends in .fifo) and
// returns its URL path (/Account/name).
func (s *Server) CreateQueue(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.create(name, 30*time.Second)
	return "/" + Account + "/" + name
}

func (s *Server) create(name string, vis time.Duration) *queue {
	if q, ok := s.queues[name]; ok {
		return q
	}
	q := &queue{name: name, fifo: strings.HasSuffix(name, ".fifo"), visibility: vis, dedup: map[string]dedupEntry{}}
	s.queues[name] = q
	return q
}

// Messages returns the messages a queue holds, in send order, in flight or
// not; nil for an unknown queue. It changes nothing.
func (s *Server) Messages(name string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[name]
	if q == nil {
		return nil
	}
	now := time.Now()
	out := make([]Message, len(q.msgs))
	for i, m := range q.msgs {
		out[i] = Message{ID: m.id, Body: m.body, Attributes: m.attrs, GroupID: m.group, DedupID: m.dedup,
			ReceiveCount: m.receives, InFlight: m.visibleAt.After(now), SequenceNumber: m.seq}
	}
	return out
}

// Calls returns how many calls of action the server answered.
func (s *Server) Calls(action string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[action]
}

// apiError is an error response.
type apiError struct {
	status    int
	typ       string // __type, the shape name
	queryCode string // x-amzn-query-error's code
	msg       string
}

func (e *apiError) Error() string { return e.typ + ": " + e.msg }

func errf(typ, queryCode, format string, args ...any) *apiError {
	return &apiError{status: 400, typ: typ, queryCode: queryCode, msg: fmt.Sprintf(format, args...)}
}

func errNoQueue() *apiError {
	return errf("QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue", "The specified queue does not exist.")
}

func errInvalid(format string, args ...any) *apiError {
	return errf("InvalidParameterValue", "InvalidParameterValue", format, args...)
}

// ServeHTTP answers one call.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	out, err := s.serve(r)
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("x-amzn-RequestId", "fake")
	if err != nil {
		typ := err.typ
		if !strings.Contains(typ, "#") {
			typ = "com.amazonaws.sqs#" + typ
		}
		w.Header().Set("x-amzn-query-error", err.queryCode+";Sender")
		w.WriteHeader(err.status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": err.msg})
		return
	}
	_ = json.NewEncoder(w).Encode(out)
}

func (s *Server) serve(r *http.Request) (any, *apiError) {
	if r.Method != http.MethodPost || r.URL.Path != "/" {
		return nil, &apiError{status: 404, typ: "UnknownOperationException", queryCode: "UnknownOperation", msg: "POST / only"}
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-amz-json-1.0") {
		return nil, errf("InvalidParameterValue", "InvalidParameterValue", "Content-Type %q, want application/x-amz-json-1.0", ct)
	}
	action, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS.")
	if !ok {
		return nil, &apiError{status: 400, typ: "UnknownOperationException", queryCode: "UnknownOperation", msg: "X-Amz-Target is not AmazonSQS.<Action>"}
	}
	if err := s.authorize(r); err != nil {
		return nil, err
	}
	var req request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		return nil, errf("InvalidParameterValue", "InvalidParameterValue", "body: %v", err)
	}
	s.mu.Lock()
	s.calls[action]++
	s.mu.Unlock()
	switch action {
	case "CreateQueue":
		return s.createQueue(r, &req)
	case "GetQueueUrl":
		return s.getQueueURL(r, &req)
	case "ListQueues":
		return s.listQueues(r, &req)
	case "GetQueueAttributes":
		return s.getQueueAttributes(&req)
	case "SendMessage":
		return s.sendMessage(&req)
	case "SendMessageBatch":
		return s.sendMessageBatch(&req)
	case "ReceiveMessage":
		return s.receiveMessage(r, &req)
	case "ChangeMessageVisibility":
		return s.changeVisibility(&req)
	case "DeleteMessage":
		return s.deleteMessage(&req)
	case "DeleteMessageBatch":
		return s.deleteMessageBatch(&req)
	}
	return nil, &apiError{status: 400, typ: "UnknownOperationException", queryCode: "UnknownOperation", msg: "the fake does not implement " + action}
}

// authorize refuses an access key the server does not know, when
// Options.AccessKeys is set. The signature is not checked.
func (s *Server) authorize(r *http.Request) *apiError {
	if len(s.opts.AccessKeys) == 0 {
		return nil
	}
	auth := r.Header.Get("Authorization")
	_, cred, _ := strings.Cut(auth, "Credential=")
	key, _, _ := strings.Cut(cred, "/")
	for _, k := range s.opts.AccessKeys {
		if key == k && key != "" {
			return nil
		}
	}
	return &apiError{status: 403, typ: "com.amazon.coral.service#InvalidClientTokenId", queryCode: "InvalidClientTokenId",
		msg: "The security token included in the request is invalid."}
}

// request is the union of the fields of the implemented calls.
type request struct {
	QueueName                   string
	QueueNamePrefix             string
	MaxResults                  int
	Attributes                  map[string]string
	QueueUrl                    string //nolint:revive // the wire name
	MessageBody                 string
	MessageAttributes           map[string]Attribute
	MessageGroupId              string //nolint:revive // the wire name
	MessageDeduplicationId      string //nolint:revive // the wire name
	Entries                     []entry
	MaxNumberOfMessages         int
	VisibilityTimeout           *int
	WaitTimeSeconds             *int
	AttributeNames              []string
	MessageSystemAttributeNames []string
	MessageAttributeNames       []string
	ReceiptHandle               string
}

type entry struct {
	Id                     string //nolint:revive // the wire name
	MessageBody            string
	MessageAttributes      map[string]Attribute
	MessageGroupId         string //nolint:revive // the wire name
	MessageDeduplicationId string //nolint:revive // the wire name
	ReceiptHandle          string
}

func (s *Server) queueURL(r *http.Request, name string) string {
	return "http://" + r.Host + "/" + Account + "/" + name
}

// lookup finds the queue of a URL; s.mu is held.
func (s *Server) lookup(rawURL string) (*queue, *apiError) {
	u, err := url.Parse(rawURL)
	if err != nil || rawURL == "" {
		return nil, errNoQueue()
	}
	name := u.Path[strings.LastIndexByte(u.Path, '/')+1:]
	q := s.queues[name]
	if q == nil {
		return nil, errNoQueue()
	}
	return q, nil
}

func validName(name string) bool {
	base := strings.TrimSuffix(name, ".fifo")
	if base == "" || len(name) > 80 {
		return false
	}
	for _, c := range base {
		if !alnum(c) && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

func (s *Server) createQueue(r *http.Request, req *request) (any, *apiError) {
	if !validName(req.QueueName) {
		return nil, errInvalid("queue name %q: alphanumerics, hyphens and underscores, at most 80, .fifo for a FIFO queue", req.QueueName)
	}
	fifo := req.Attributes["FifoQueue"] == "true"
	if fifo != strings.HasSuffix(req.QueueName, ".fifo") {
		return nil, errInvalid("a FIFO queue's name ends in .fifo, and only its")
	}
	vis := 30 * time.Second
	if v := req.Attributes["VisibilityTimeout"]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 43200 {
			return nil, errInvalid("VisibilityTimeout %q", v)
		}
		vis = time.Duration(n) * time.Second
	}
	s.mu.Lock()
	s.create(req.QueueName, vis)
	s.mu.Unlock()
	return map[string]string{"QueueUrl": s.queueURL(r, req.QueueName)}, nil
}

func (s *Server) getQueueURL(r *http.Request, req *request) (any, *apiError) {
	s.mu.Lock()
	_, ok := s.queues[req.QueueName]
	s.mu.Unlock()
	if !ok {
		return nil, errNoQueue()
	}
	return map[string]string{"QueueUrl": s.queueURL(r, req.QueueName)}, nil
}

func (s *Server) listQueues(r *http.Request, req *request) (any, *apiError) {
	s.mu.Lock()
	var names []string
	for n := range s.queues {
		if strings.HasPrefix(n, req.QueueNamePrefix) {
			names = append(names, n)
		}
	}
	s.mu.Unlock()
	sort.Strings(names)
	if req.MaxResults > 0 && len(names) > req.MaxResults {
		names = names[:req.MaxResults]
	}
	urls := make([]string, len(names))
	for i, n := range names {
		urls[i] = s.queueURL(r, n)
	}
	return map[string]any{"QueueUrls": urls}, nil
}

func (s *Server) getQueueAttributes(req *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(req.QueueUrl)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	visible, inFlight := 0, 0
	for _, m := range q.msgs {
		if m.visibleAt.After(now) {
			inFlight++
		} else {
			visible++
		}
	}
	return map[string]any{"Attributes": map[string]string{
		"ApproximateNumberOfMessages":           strconv.Itoa(visible),
		"ApproximateNumberOfMessagesNotVisible": strconv.Itoa(inFlight),
		"FifoQueue":                             strconv.FormatBool(q.fifo),
		"VisibilityTimeout":                     strconv.Itoa(int(q.visibility / time.Second)),
	}}, nil
}

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// size is what SQS counts against the message size: the body, and each
// attribute's name, type and value.
func size(body string, attrs map[string]Attribute) int {
	n := len(body)
	for k, a := range attrs {
		n += len(k) + len(a.DataType) + len(a.StringValue) + len(a.BinaryValue)
	}
	return n
}

// validText reports whether s holds only the characters SQS allows in a
// body or string attribute: #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to
// #xFFFD | #x10000 to #x10FFFF.
func validText(s string) bool {
	for _, c := range s {
		switch {
		case c == 0x9 || c == 0xA || c == 0xD:
		case c >= 0x20 && c <= 0xD7FF, c >= 0xE000 && c <= 0xFFFD, c >= 0x10000 && c <= 0x10FFFF:
		default:
			return false
		}
	}
	return true
}

// send stores one message; s.mu is held. It returns the message ID and
// sequence number.
func (s *Server) send(q *queue, e *entry) (string, string, *apiError) {
	if e.MessageBody == "" {
		return "", "", errf("MissingParameter", "MissingParameter", "The request must contain the parameter MessageBody.")
	}
	if !validText(e.MessageBody) {
		return "", "", errf("InvalidMessageContents", "InvalidMessageContents", "Invalid binary character in the message body")
	}
	if len(e.MessageAttributes) > 10 {
		return "", "", errInvalid("Number of message attributes [%d] exceeds the allowed maximum [10].", len(e.MessageAttributes))
	}
	for k, a := range e.MessageAttributes {
		if k == "" || strings.HasPrefix(strings.ToLower(k), "aws.") || strings.HasPrefix(strings.ToLower(k), "amazon.") {
			return "", "", errInvalid("message attribute name %q", k)
		}
		switch {
		case strings.HasPrefix(a.DataType, "String"), strings.HasPrefix(a.DataType, "Number"):
			if a.StringValue == "" || !validText(a.StringValue) {
				return "", "", errInvalid("message attribute %q: a string value of allowed characters is required", k)
			}
		case strings.HasPrefix(a.DataType, "Binary"):
			if len(a.BinaryValue) == 0 {
				return "", "", errInvalid("message attribute %q: a binary value is required", k)
			}
		default:
			return "", "", errInvalid("message attribute %q: DataType %q", k, a.DataType)
		}
	}
	if n := size(e.MessageBody, e.MessageAttributes); n > s.opts.MaxMessageSize {
		return "", "", errInvalid("One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", s.opts.MaxMessageSize)
	}
	now := time.Now()
	if q.fifo {
		if e.MessageGroupId == "" {
			return "", "", errf("MissingParameter", "MissingParameter", "The request must contain the parameter MessageGroupId.")
		}
		if e.MessageDeduplicationId == "" {
			return "", "", errInvalid("The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly")
		}
		if d, ok := q.dedup[e.MessageDeduplicationId]; ok && now.Sub(d.at) < DedupWindow {
			return d.id, "", nil // accepted, not stored again
		}
	} else if e.MessageGroupId != "" || e.MessageDeduplicationId != "" {
		// Standard queues have taken MessageGroupId since 2024 (fair
		// queues); a deduplication ID they refuse.
		if e.MessageDeduplicationId != "" {
			return "", "", errInvalid("The request include parameter that is not valid for this queue type")
		}
	}
	s.seq++
	m := &message{id: fmt.Sprintf("%08x-fake-%012d", s.seq, s.seq), body: e.MessageBody, md5: md5hex(e.MessageBody),
		attrs: e.MessageAttributes, group: e.MessageGroupId, dedup: e.MessageDeduplicationId, seq: s.seq, sent: now}
	q.msgs = append(q.msgs, m)
	if q.fifo {
		q.dedup[e.MessageDeduplicationId] = dedupEntry{at: now, id: m.id}
		q.dedupOrder = append(q.dedupOrder, e.MessageDeduplicationId)
		q.expireDedup(now)
	}
	s.notify()
	seq := ""
	if q.fifo {
		seq = strconv.FormatInt(m.seq, 10)
	}
	return m.id, seq, nil
}

// notify wakes the long polls; s.mu is held.
func (s *Server) notify() {
	close(s.wake)
	s.wake = make(chan struct{})
}

func (s *Server) sendMessage(req *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(req.QueueUrl)
	if err != nil {
		return nil, err
	}
	e := entry{MessageBody: req.MessageBody, MessageAttributes: req.MessageAttributes,
		MessageGroupId: req.MessageGroupId, MessageDeduplicationId: req.MessageDeduplicationId}
	id, seq, err := s.send(q, &e)
	if err != nil {
		return nil, err
	}
	out := map[string]string{"MessageId": id, "MD5OfMessageBody": md5hex(req.MessageBody)}
	if seq != "" {
		out["SequenceNumber"] = seq
	}
	return out, nil
}

func checkBatch[T any](entries []T, id func(T) string) *apiError {
	if len(entries) == 0 {
		return errf("EmptyBatchRequest", "AWS.SimpleQueueService.EmptyBatchRequest", "There should be at least one entry in the request.")
	}
	if len(entries) > 10 {
		return errf("TooManyEntriesInBatchRequest", "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", "Maximum number of entries per request are 10. You have sent %d.", len(entries))
	}
	seen := map[string]bool{}
	for _, e := range entries {
		if seen[id(e)] {
			return errf("BatchEntryIdsNotDistinct", "AWS.SimpleQueueService.BatchEntryIdsNotDistinct", "Id %s repeated.", id(e))
		}
		seen[id(e)] = true
	}
	return nil
}

type failed struct {
	Id          string //nolint:revive // the wire name
	SenderFault bool
	Code        string
	Message     string
}

func (s *Server) sendMessageBatch(req *request) (any, *apiError) {
	if err := checkBatch(req.Entries, func(e entry) string { return e.Id }); err != nil {
		return nil, err
	}
	total := 0
	for _, e := range req.Entries {
		total += size(e.MessageBody, e.MessageAttributes)
	}
	if total > s.opts.MaxMessageSize {
		return nil, errf("BatchRequestTooLong", "AWS.SimpleQueueService.BatchRequestTooLong", "Batch requests cannot be longer than %d bytes. You have sent %d bytes.", s.opts.MaxMessageSize, total)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(req.QueueUrl)
	if err != nil {
		return nil, err
	}
	ok := []map[string]string{}
	bad := []failed{}
	for i := range req.Entries {
		e := &req.Entries[i]
		if s.opts.FailEntry != nil {
			if code, sender := s.opts.FailEntry(e.MessageBody); code != "" {
				bad = append(bad, failed{Id: e.Id, SenderFault: sender, Code: code, Message: "failed by Options.FailEntry"})
				continue
			}
		}
		id, seq, err := s.send(q, e)
		if err != nil {
			bad = append(bad, failed{Id: e.Id, SenderFault: true, Code: err.typ, Message: err.msg})
			continue
		}
		r := map[string]string{"Id": e.Id, "MessageId": id, "MD5OfMessageBody": md5hex(e.MessageBody)}
		if seq != "" {
			r["SequenceNumber"] = seq
		}
		ok = append(ok, r)
	}
	return map[string]any{"Successful": ok, "Failed": bad}, nil
}

type received struct {
	MessageId         string               //nolint:revive // the wire name
	ReceiptHandle     string               `json:"ReceiptHandle"`
	MD5OfBody         string               `json:"MD5OfBody"`
	Body              string               `json:"Body"`
	Attributes        map[string]string    `json:"Attributes,omitempty"`
	MessageAttributes map[string]Attribute `json:"MessageAttributes,omitempty"`
}

func (s *Server) receiveMessage(r *http.Request, req *request) (any, *apiError) {
	max := req.MaxNumberOfMessages
	if max == 0 {
		max = 1
	}
	if max < 1 || max > 10 {
		return nil, errInvalid("Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10.", max)
	}
	wait := 0
	if req.WaitTimeSeconds != nil {
		wait = *req.WaitTimeSeconds
	}
	if wait < 0 || wait > 20 {
		return nil, errInvalid("Value %d for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20.", wait)
	}
	deadline := time.Now().Add(time.Duration(wait) * time.Second)
	for {
		s.mu.Lock()
		q, err := s.lookup(req.QueueUrl)
		if err != nil {
			s.mu.Unlock()
			return nil, err
		}
		vis := q.visibility
		if req.VisibilityTimeout != nil {
			vis = time.Duration(*req.VisibilityTimeout) * time.Second
		}
		msgs, next := s.take(q, max, vis, req)
		wake := s.wake
		s.mu.Unlock()
		if len(msgs) > 0 {
			return map[string]any{"Messages": msgs}, nil
		}
		now := time.Now()
		if !now.Before(deadline) {
			return map[string]any{}, nil
		}
		until := deadline.Sub(now)
		if !next.IsZero() && next.Sub(now) < until {
			until = max0(next.Sub(now))
		}
		t := time.NewTimer(until)
		select {
		case <-wake:
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return nil, &apiError{status: 500, typ: "InternalError", queryCode: "InternalError", msg: "the client went away"}
		}
		t.Stop()
	}
}

func max0(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return time.Millisecond
	}
	return d
}

// take receives up to n messages; s.mu is held. It returns the messages
// and when the next in-flight one becomes visible (zero if none is in
// flight).
func (s *Server) take(q *queue, n int, vis time.Duration, req *request) ([]received, time.Time) {
	now := time.Now()
	var next time.Time
	blocked := map[string]bool{} // FIFO groups with a message in flight
	if q.fifo {
		for _, m := range q.msgs {
			if m.visibleAt.After(now) {
				blocked[m.group] = true
			}
		}
	}
	names := map[string]bool{}
	for _, a := range append(append([]string(nil), req.AttributeNames...), req.MessageSystemAttributeNames...) {
		names[a] = true
	}
	var out []received
	for _, m := range q.msgs {
		if m.visibleAt.After(now) {
			if next.IsZero() || m.visibleAt.Before(next) {
				next = m.visibleAt
			}
			continue
		}
		if len(out) == n {
			break
		}
		if q.fifo && blocked[m.group] {
			continue
		}
		m.receives++
		m.visibleAt = now.Add(vis)
		s.seq++
		m.receipt = fmt.Sprintf("%s#%d", m.id, s.seq)
		attrs := map[string]string{}
		if names["All"] || names["ApproximateReceiveCount"] {
			attrs["ApproximateReceiveCount"] = strconv.Itoa(m.receives)
		}
		if names["All"] || names["SentTimestamp"] {
			attrs["SentTimestamp"] = strconv.FormatInt(m.sent.UnixMilli(), 10)
		}
		if q.fifo && (names["All"] || names["MessageGroupId"]) {
			attrs["MessageGroupId"] = m.group
		}
		if q.fifo && (names["All"] || names["MessageDeduplicationId"]) {
			attrs["MessageDeduplicationId"] = m.dedup
		}
		r := received{MessageId: m.id, ReceiptHandle: m.receipt, MD5OfBody: m.md5, Body: m.body, Attributes: attrs}
		if len(req.MessageAttributeNames) > 0 {
			r.MessageAttributes = pick(m.attrs, req.MessageAttributeNames)
		}
		out = append(out, r)
	}
	return out, next
}

// pick selects the attributes the request names: All or .*, a name, or a
// prefix.*.
func pick(attrs map[string]Attribute, names []string) map[string]Attribute {
	out := map[string]Attribute{}
	for k, a := range attrs {
		for _, n := range names {
			if n == "All" || n == ".*" || n == k || strings.HasSuffix(n, ".*") && strings.HasPrefix(k, strings.TrimSuffix(n, "*")) {
				out[k] = a
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// byReceipt finds a message by its current receipt handle; s.mu is held.
func byReceipt(q *queue, receipt string) (int, *apiError) {
	for i, m := range q.msgs {
		if m.receipt == receipt && receipt != "" {
			return i, nil
		}
	}
	return -1, errf("ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid", "The input receipt handle %q is not a valid receipt handle.", receipt)
}

func (s *Server) changeVisibility(req *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(req.QueueUrl)
	if err != nil {
		return nil, err
	}
	i, err := byReceipt(q, req.ReceiptHandle)
	if err != nil {
		return nil, err
	}
	if req.VisibilityTimeout == nil || *req.VisibilityTimeout < 0 || *req.VisibilityTimeout > 43200 {
		return nil, errInvalid("VisibilityTimeout must be between 0 and 43200")
	}
	m := q.msgs[i]
	if !m.visibleAt.After(time.Now()) {
		return nil, errf("MessageNotInflight", "AWS.SimpleQueueService.MessageNotInflight", "The message is not in flight.")
	}
	m.visibleAt = time.Now().Add(time.Duration(*req.VisibilityTimeout) * time.Second)
	s.notify()
	return map[string]any{}, nil
}

func (s *Server) deleteMessage(req *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(req.QueueUrl)
	if err != nil {
		return nil, err
	}
	if err := s.remove(q, req.ReceiptHandle); err != nil {
		return nil, err
	}
	return map[string]any{}, nil
}

// remove deletes the message of a receipt handle; s.mu is held. A handle
// whose message is gone already succeeds, as with SQS.
func (s *Server) remove(q *queue, receipt string) *apiError {
	if receipt == "" {
		return errf("ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid", "empty receipt handle")
	}
	for i, m := range q.msgs {
		if m.receipt == receipt {
			q.msgs = append(q.msgs[:i], q.msgs[i+1:]...)
			s.notify()
			return nil
		}
	}
	return nil
}

func (s *Server) deleteMessageBatch(req *request) (any, *apiError) {
	if err := checkBatch(req.Entries, func(e entry) string { return e.Id }); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(req.QueueUrl)
	if err != nil {
		return nil, err
	}
	ok := []map[string]string{}
	bad := []failed{}
	for _, e := range req.Entries {
		if err := s.remove(q, e.ReceiptHandle); err != nil {
			bad = append(bad, failed{Id: e.Id, SenderFault: true, Code: err.typ, Message: err.msg})
			continue
		}
		ok = append(ok, map[string]string{"Id": e.Id})
	}
	return map[string]any{"Successful": ok, "Failed": bad}, nil
}

// alnum reports whether c is an ASCII letter or digit.
func alnum(c rune) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }

// expireDedup forgets the deduplication IDs older than DedupWindow, oldest
// first, stopping at the first one still in the window.
func (q *queue) expireDedup(now time.Time) {
	n := 0
	for _, k := range q.dedupOrder {
		d, ok := q.dedup[k]
		if ok && now.Sub(d.at) < DedupWindow {
			break
		}
		if ok {
			delete(q.dedup, k)
		}
		n++
	}
	q.dedupOrder = q.dedupOrder[n:]
}
