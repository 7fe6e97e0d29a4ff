package sqs

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
)

// maxBatch is SQS's limit of entries per SendMessageBatch.
const maxBatch = 10

// Publisher publishes outbox messages to SQS queues with SendMessageBatch.
// It is safe for concurrent use.
type Publisher struct {
	cfg       PublisherConfig
	log       *slog.Logger
	client    *sqs.Client
	closeIdle func()
	sem       chan struct{} // one token per SendMessageBatch in flight

	urlsMu sync.Mutex
	urls   map[string]string // queue name → URL

	mu     sync.RWMutex // held shared while publishing, exclusively by Close
	closed bool
}

var _ publishers.Publisher = (*Publisher)(nil)

// NewPublisher returns a Publisher configured by cfg. It makes a client
// (credentials from cfg.Credentials or the SDK's default chain) unless
// cfg.Client is set, and does not call SQS: it succeeds while SQS is
// unreachable and when SQS would refuse the credentials; Check tells these
// apart before the first publish.
func NewPublisher(ctx context.Context, cfg *PublisherConfig) (*Publisher, error) {
	var c PublisherConfig
	if cfg != nil {
		c = *cfg
	}
	c = c.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	p := &Publisher{cfg: c, log: c.Logger, client: c.Client, closeIdle: func() {},
		sem: make(chan struct{}, c.MaxInFlight), urls: map[string]string{}}
	if p.client == nil {
		client, closeIdle, err := NewClient(ctx, ClientOptions{Region: c.Region, Endpoint: c.Endpoint,
			Credentials: c.Credentials, MaxAttempts: c.MaxAttempts, MaxConns: c.MaxInFlight + 4})
		if err != nil {
			return nil, fmt.Errorf("sqs publisher: %w", err)
		}
		p.client, p.closeIdle = client, closeIdle
	}
	return p, nil
}

// Client returns the client the Publisher publishes with.
func (p *Publisher) Client() *sqs.Client { return p.client }

// QueueName returns the name of the queue topic goes to.
func (p *Publisher) QueueName(topic string) string { return p.cfg.queueName(topic) }

// queueURL returns the URL of a queue, asking SQS (GetQueueUrl) the first
// time and remembering it.
func (p *Publisher) queueURL(ctx context.Context, name string) (string, error) {
	p.urlsMu.Lock()
	u, ok := p.urls[name]
	p.urlsMu.Unlock()
	if ok {
		return u, nil
	}
	in := &sqs.GetQueueUrlInput{QueueName: aws.String(name)}
	if p.cfg.Account != "" {
		in.QueueOwnerAWSAccountId = aws.String(p.cfg.Account)
	}
	out, err := p.client.GetQueueUrl(ctx, in)
	if err != nil {
		return "", classify(fmt.Errorf("GetQueueUrl %q: %w", name, err))
	}
	u = aws.ToString(out.QueueUrl)
	p.urlsMu.Lock()
	p.urls[name] = u
	p.urlsMu.Unlock()
	return u, nil
}

// pending is one message on its way.
type pending struct {
	i   int // index in the call's msgs
	msg *outbox.Message
	enc encoded
}

// Publish sends msgs to their queues and returns one error per message,
// nil when SQS stored it (for a FIFO queue: or dropped it as a duplicate of
// one it stored within its deduplication window). Messages go in
// SendMessageBatch calls of up to 10, many in flight at once; the messages
// of one key (of one queue) go in order, one batch after the other. Once
// one of them fails, the key's later batches in the call are not sent
// (their messages fail, retryable); SQS takes a batch's entries one by
// one, so the key's messages in the same batch as the failed one may be
// stored. The publisher therefore promises no publishers.OrderKeeper. See
// the package documentation for how errors are classified.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := make([]error, len(msgs))
	if len(msgs) == 0 {
		return errs
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		for i := range msgs {
			errs[i] = publishers.Unavailable(fmt.Errorf("sqs publish %s: %w", msgs[i].ID, ErrClosed))
		}
		return errs
	}
	if err := ctx.Err(); err != nil {
		for i := range msgs {
			errs[i] = publishers.Unavailable(fmt.Errorf("sqs publish %s: not sent: %w", msgs[i].ID, err))
		}
		return errs
	}
	// By queue, in order; each queue's messages in lanes by key.
	type queueWork struct {
		name  string
		lanes [][]pending
	}
	var queues []*queueWork
	byName := map[string]*queueWork{}
	unkeyed := 0
	for i := range msgs {
		m := &msgs[i]
		name := p.cfg.queueName(m.Topic)
		if !validQueueName(name) {
			errs[i] = publishers.Permanent(fmt.Errorf("sqs publish %s: topic %q: queue %q: %w (1 to 80 letters, digits, hyphens and underscores; .fifo at the end of a FIFO queue's)",
				m.ID, m.Topic, name, ErrBadQueueName))
			continue
		}
		enc, err := encodeMessage(m)
		if err != nil {
			errs[i] = publishers.Permanent(fmt.Errorf("sqs publish %s: %w", m.ID, err))
			continue
		}
		if enc.size > p.cfg.MaxSize {
			errs[i] = publishers.Permanent(fmt.Errorf("sqs publish %s: %w: %d bytes of body and attributes, limit %d", m.ID, ErrTooLarge, enc.size, p.cfg.MaxSize))
			continue
		}
		q := byName[name]
		if q == nil {
			q = &queueWork{name: name, lanes: make([][]pending, p.cfg.MaxInFlight)}
			byName[name] = q
			queues = append(queues, q)
		}
		lane := unkeyed % len(q.lanes)
		if m.Key != "" {
			h := fnv.New32a()
			_, _ = h.Write([]byte(m.Key))
			lane = int(h.Sum32() % uint32(len(q.lanes)))
		} else {
			unkeyed++
		}
		q.lanes[lane] = append(q.lanes[lane], pending{i: i, msg: m, enc: enc})
	}
	var wg sync.WaitGroup
	for _, q := range queues {
		url, err := p.queueURL(ctx, q.name)
		if err != nil {
			for _, lane := range q.lanes {
				for _, pm := range lane {
					errs[pm.i] = fmt.Errorf("sqs publish %s to queue %q: %w", pm.msg.ID, q.name, err)
				}
			}
			continue
		}
		for _, lane := range q.lanes {
			if len(lane) == 0 {
				continue
			}
			wg.Go(func() { p.sendLane(ctx, q.name, url, lane, errs) })
		}
	}
	wg.Wait()
	return errs
}

// sendLane sends a lane's messages in order, in batches of up to 10 and
// MaxSize bytes, one batch at a time. A message whose key had a failure
// earlier in the lane is not sent.
func (p *Publisher) sendLane(ctx context.Context, queue, url string, lane []pending, errs []error) {
	failedKeys := map[string]error{}
	fifo := isFIFO(queue)
	for len(lane) > 0 {
		var batch []pending
		size := 0
		rest := lane[:0:0]
		for n, pm := range lane {
			if cause, ok := failedKeys[pm.msg.Key]; ok && pm.msg.Key != "" {
				errs[pm.i] = fmt.Errorf("sqs publish %s to queue %q: not sent: an earlier message of its key failed: %v", pm.msg.ID, queue, cause)
				continue
			}
			if len(batch) == maxBatch || (len(batch) > 0 && size+pm.enc.size > p.cfg.MaxSize) {
				rest = lane[n:]
				break
			}
			batch = append(batch, pm)
			size += pm.enc.size
		}
		lane = rest
		if len(batch) == 0 {
			continue
		}
		p.sendBatch(ctx, queue, url, fifo, batch, errs)
		for _, pm := range batch {
			if errs[pm.i] != nil && pm.msg.Key != "" {
				if _, ok := failedKeys[pm.msg.Key]; !ok {
					failedKeys[pm.msg.Key] = errs[pm.i]
				}
			}
		}
	}
}

// sendBatch sends one SendMessageBatch and sets the errors of its
// messages.
func (p *Publisher) sendBatch(ctx context.Context, queue, url string, fifo bool, batch []pending, errs []error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		for _, pm := range batch {
			errs[pm.i] = publishers.Unavailable(fmt.Errorf("sqs publish %s to queue %q: not sent: %w", pm.msg.ID, queue, ctx.Err()))
		}
		return
	}
	defer func() { <-p.sem }()
	entries := make([]types.SendMessageBatchRequestEntry, len(batch))
	for n, pm := range batch {
		e := types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(n)), MessageBody: aws.String(pm.enc.body),
			MessageAttributes: pm.enc.attrs}
		if fifo {
			group := pm.msg.Key
			if group == "" {
				group = pm.msg.Topic
			}
			e.MessageGroupId = aws.String(GroupID(group))
			e.MessageDeduplicationId = aws.String(pm.msg.ID.String())
		}
		entries[n] = e
	}
	out, err := p.client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
	if err != nil {
		err = classify(err)
		if publishers.IsMisconfigured(err) && codeOf(err) != "" {
			p.forget(queue) // the queue may be gone: ask for its URL again next time
		}
		for _, pm := range batch {
			errs[pm.i] = fmt.Errorf("sqs publish %s to queue %q: %w", pm.msg.ID, queue, err)
		}
		return
	}
	done := make([]bool, len(batch))
	for _, ok := range out.Successful {
		if n, err := strconv.Atoi(aws.ToString(ok.Id)); err == nil && n >= 0 && n < len(batch) {
			done[n] = true
		}
	}
	for _, f := range out.Failed {
		n, err := strconv.Atoi(aws.ToString(f.Id))
		if err != nil || n < 0 || n >= len(batch) {
			continue
		}
		pm := batch[n]
		done[n] = true
		code := aws.ToString(f.Code)
		errs[pm.i] = entryError(code, f.SenderFault, fmt.Errorf("sqs publish %s to queue %q: %s (sender fault %v): %s",
			pm.msg.ID, queue, code, f.SenderFault, aws.ToString(f.Message)))
	}
	for n, pm := range batch {
		if !done[n] {
			errs[pm.i] = fmt.Errorf("sqs publish %s to queue %q: SQS reported the entry neither successful nor failed", pm.msg.ID, queue)
		}
	}
}

// forget drops a queue's remembered URL.
func (p *Publisher) forget(queue string) {
	p.urlsMu.Lock()
	delete(p.urls, queue)
	p.urlsMu.Unlock()
}

// Close stops the publisher: later Publish calls fail as unavailable, and
// the idle connections of a client NewPublisher made are closed. Calling
// Close again does nothing.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	p.closeIdle()
	return nil
}
