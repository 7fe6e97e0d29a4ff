package sns

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
)

// maxBatch is SNS's limit of entries per PublishBatch.
const maxBatch = 10

// Publisher publishes outbox messages to SNS topics with PublishBatch. It
// is safe for concurrent use.
type Publisher struct {
	cfg       PublisherConfig
	log       *slog.Logger
	client    *sns.Client
	closeIdle func()
	sem       chan struct{}

	mu     sync.RWMutex // held shared while publishing, exclusively by Close
	closed bool
}

var _ publishers.Publisher = (*Publisher)(nil)

// NewPublisher returns a Publisher configured by cfg. It makes a client
// (credentials from cfg.Credentials or the SDK's default chain) unless
// cfg.Client is set, and does not call SNS; Check proves the
// configuration.
func NewPublisher(ctx context.Context, cfg *PublisherConfig) (*Publisher, error) {
	var c PublisherConfig
	if cfg != nil {
		c = *cfg
	}
	c = c.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	p := &Publisher{cfg: c, log: c.Logger, client: c.Client, closeIdle: func() {}, sem: make(chan struct{}, c.MaxInFlight)}
	if p.client == nil {
		client, closeIdle, err := newClient(ctx, &c)
		if err != nil {
			return nil, fmt.Errorf("sns publisher: %w", err)
		}
		p.client, p.closeIdle = client, closeIdle
	}
	return p, nil
}

// Client returns the client the Publisher publishes with.
func (p *Publisher) Client() *sns.Client { return p.client }

// TopicARN returns the ARN of the SNS topic an outbox topic goes to.
func (p *Publisher) TopicARN(topic string) string { return p.cfg.arn(p.cfg.topicName(topic)) }

type pending struct {
	i   int
	msg *outbox.Message
	enc encoded
}

// Publish sends msgs to their topics and returns one error per message,
// nil when SNS accepted it. Messages go in PublishBatch calls of up to 10,
// many in flight at once; the messages of one key (of one topic) go in
// order, one batch after the other. Once one fails, the key's later
// batches in the call are not sent (their messages fail, retryable); the
// key's messages in the same batch SNS takes one by one and may accept.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := make([]error, len(msgs))
	if len(msgs) == 0 {
		return errs
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		for i := range msgs {
			errs[i] = publishers.Unavailable(fmt.Errorf("sns publish %s: %w", msgs[i].ID, ErrClosed))
		}
		return errs
	}
	if err := ctx.Err(); err != nil {
		for i := range msgs {
			errs[i] = publishers.Unavailable(fmt.Errorf("sns publish %s: not sent: %w", msgs[i].ID, err))
		}
		return errs
	}
	type topicWork struct {
		name  string
		lanes [][]pending
	}
	var topics []*topicWork
	byName := map[string]*topicWork{}
	unkeyed := 0
	for i := range msgs {
		m := &msgs[i]
		name := p.cfg.topicName(m.Topic)
		if !validTopicName(name) {
			errs[i] = publishers.Permanent(fmt.Errorf("sns publish %s: topic %q: SNS topic %q: %w (1 to 256 letters, digits, hyphens and underscores; .fifo at the end of a FIFO topic's)",
				m.ID, m.Topic, name, ErrBadTopicName))
			continue
		}
		enc, err := encodeMessage(m)
		if err != nil {
			errs[i] = publishers.Permanent(fmt.Errorf("sns publish %s: %w", m.ID, err))
			continue
		}
		if enc.size > p.cfg.MaxSize {
			errs[i] = publishers.Permanent(fmt.Errorf("sns publish %s: %w: %d bytes of body and attributes, limit %d", m.ID, ErrTooLarge, enc.size, p.cfg.MaxSize))
			continue
		}
		t := byName[name]
		if t == nil {
			t = &topicWork{name: name, lanes: make([][]pending, p.cfg.MaxInFlight)}
			byName[name] = t
			topics = append(topics, t)
		}
		lane := unkeyed % len(t.lanes)
		if m.Key != "" {
			h := fnv.New32a()
			_, _ = h.Write([]byte(m.Key))
			lane = int(h.Sum32() % uint32(len(t.lanes)))
		} else {
			unkeyed++
		}
		t.lanes[lane] = append(t.lanes[lane], pending{i: i, msg: m, enc: enc})
	}
	var wg sync.WaitGroup
	for _, t := range topics {
		arn := p.cfg.arn(t.name)
		for _, lane := range t.lanes {
			if len(lane) > 0 {
				wg.Go(func() { p.sendLane(ctx, arn, isFIFO(t.name), lane, errs) })
			}
		}
	}
	wg.Wait()
	return errs
}

// sendLane sends a lane's messages in order, in batches of up to 10 and
// MaxSize bytes, one batch at a time; a message whose key failed earlier
// in the lane is not sent.
func (p *Publisher) sendLane(ctx context.Context, arn string, fifo bool, lane []pending, errs []error) {
	failedKeys := map[string]error{}
	for len(lane) > 0 {
		var batch []pending
		size := 0
		rest := lane[:0:0]
		for n, pm := range lane {
			if cause, ok := failedKeys[pm.msg.Key]; ok && pm.msg.Key != "" {
				errs[pm.i] = fmt.Errorf("sns publish %s to %s: not sent: an earlier message of its key failed: %v", pm.msg.ID, arn, cause)
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
		p.sendBatch(ctx, arn, fifo, batch, errs)
		for _, pm := range batch {
			if errs[pm.i] != nil && pm.msg.Key != "" {
				if _, ok := failedKeys[pm.msg.Key]; !ok {
					failedKeys[pm.msg.Key] = errs[pm.i]
				}
			}
		}
	}
}

func (p *Publisher) sendBatch(ctx context.Context, arn string, fifo bool, batch []pending, errs []error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		for _, pm := range batch {
			errs[pm.i] = publishers.Unavailable(fmt.Errorf("sns publish %s to %s: not sent: %w", pm.msg.ID, arn, ctx.Err()))
		}
		return
	}
	defer func() { <-p.sem }()
	entries := make([]types.PublishBatchRequestEntry, len(batch))
	for n, pm := range batch {
		e := types.PublishBatchRequestEntry{Id: aws.String(strconv.Itoa(n)), Message: aws.String(pm.enc.body),
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
	out, err := p.client.PublishBatch(ctx, &sns.PublishBatchInput{TopicArn: aws.String(arn), PublishBatchRequestEntries: entries})
	if err != nil {
		err = classify(err)
		for _, pm := range batch {
			errs[pm.i] = fmt.Errorf("sns publish %s to %s: %w", pm.msg.ID, arn, err)
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
		errs[pm.i] = entryError(code, f.SenderFault, fmt.Errorf("sns publish %s to %s: %s (sender fault %v): %s",
			pm.msg.ID, arn, code, f.SenderFault, aws.ToString(f.Message)))
	}
	for n, pm := range batch {
		if !done[n] {
			errs[pm.i] = fmt.Errorf("sns publish %s to %s: SNS reported the entry neither successful nor failed", pm.msg.ID, arn)
		}
	}
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
