package redis

import (
	"context"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/publishers"
)

// appendRun appends a key's run of entries in order, in one step of the
// server (nothing else runs meanwhile), and stops at the first XADD that
// fails: no entry of the run is appended after one that was not. KEYS are
// the entries' streams; ARGV[1] is MAXLEN (0: none), ARGV[2] the number of
// field arguments per entry, then every entry's. It returns {ids} when
// every entry was appended, {ids, error} when the entry after the last ID
// failed with error. (redis.replicate_commands: Redis 5 and 6 replicate a
// script that XADDs with an ID of "*" only by its effects.)
var appendRun = goredis.NewScript(`
redis.replicate_commands()
local maxlen = tonumber(ARGV[1])
local per = tonumber(ARGV[2])
local ids = {}
for i, stream in ipairs(KEYS) do
	local a = 3 + (i - 1) * per
	local r
	if maxlen > 0 then
		r = redis.pcall('XADD', stream, 'MAXLEN', '~', maxlen, '*', unpack(ARGV, a, a + per - 1))
	else
		r = redis.pcall('XADD', stream, '*', unpack(ARGV, a, a + per - 1))
	end
	if type(r) == 'table' and r.err then
		return {ids, r.err}
	end
	ids[i] = r
end
return {ids}
`)

// States of Publisher.keyRuns.
const (
	runsUnknown int32 = iota // not asked yet, or Redis could not tell
	runsOn                   // KeepsKeyOrder said yes: for good
	runsOff                  // a client that is not one server's
)

// entryArgs is the number of XADD arguments of an entry's fields.
var entryArgs = len(values(&outbox.Message{}, ""))

// probeTimeout bounds KeepsKeyOrder's probe.
const probeTimeout = 5 * time.Second

// KeepsKeyOrder reports whether Publish keeps each key's order by itself
// (publishers.OrderKeeper), and so whether the relay may send a batch's
// events of a key in one call. It does, unless PublisherConfig.NoKeyRuns is
// set, when the client talks to one Redis server (not a cluster or a ring,
// whose streams may live on different nodes) and the user may run the
// publisher's script: the first call runs it on no key to find out. Where
// it cannot yet (Redis unreachable, no permission for EVAL), it says why
// once, at Info, and answers false; the relay asks again every minute.
// Once it has said yes it does for good.
func (p *Publisher) KeepsKeyOrder() bool {
	if p.cfg.NoKeyRuns {
		return false
	}
	switch p.keyRuns.Load() {
	case runsOn:
		return true
	case runsOff:
		return false
	}
	switch p.rdb.(type) {
	case *goredis.ClusterClient, *goredis.Ring:
		p.keyRuns.Store(runsOff)
		p.log.Info("redis publisher: a key's events go one at a time: the client is a cluster or ring client, whose streams may be on different servers (key runs need one server)")
		return false
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	err := appendRun.Eval(ctx, p.rdb, nil, 0, entryArgs).Err()
	if err == nil {
		p.keyRuns.Store(runsOn)
		return true
	}
	why := "cannot tell yet whether Redis runs the publisher's script"
	if isNoPerm(err) {
		why = "the Redis user may not run EVAL (grant +eval, or set key_runs=false to say so)"
	}
	if old := p.noRunsWhy.Swap(&why); old == nil || *old != why {
		p.log.Info("redis publisher: a key's events go one at a time until Redis runs the publisher's script: "+why,
			"err", redact.Text(err.Error()))
	}
	return false
}

// run is a key's run of messages sent in one call of appendRun.
type run struct {
	idx []int // the messages, in call order
	cmd *goredis.Cmd
}

// queueRun queues appendRun for the messages idx, whose fields are vals.
func (p *Publisher) queueRun(ctx context.Context, pipe goredis.Pipeliner, msgs []outbox.Message, idx []int, vals [][]any) run {
	keys := make([]string, len(idx))
	args := make([]any, 0, 2+len(idx)*entryArgs)
	args = append(args, p.cfg.MaxLen, entryArgs)
	for j, i := range idx {
		keys[j] = p.stream(msgs[i].Topic)
		args = append(args, vals[i]...)
	}
	return run{idx: idx, cmd: appendRun.Eval(ctx, pipe, keys, args...)}
}

// result sets the errors of r's messages from appendRun's reply: nil for
// each one appended, the failure for the first one that was not, and
// publishers.NotSent for the rest. execErr is the pipeline's error.
func (p *Publisher) result(r run, msgs []outbox.Message, errs []error, execErr error) {
	ids, failure := runReply(r.cmd, execErr)
	if failure == nil && len(ids) < len(r.idx) {
		failure = notAppended(fmt.Sprintf("%d entry IDs for %d entries", len(ids), len(r.idx)), execErr)
	}
	for j, i := range r.idx {
		m := &msgs[i]
		switch {
		case j < len(ids):
		case j == len(ids):
			errs[i] = classify(fmt.Errorf("redis publish %s to stream %q: %w", m.ID, p.stream(m.Topic), failure))
		default:
			errs[i] = publishers.NotSentAfter(fmt.Sprintf("redis publish %s", m.ID), errs[r.idx[len(ids)]])
		}
	}
}

// runReply reads appendRun's reply: the entry IDs appended, in order, and
// the error of the entry after them (nil when every one was appended).
func runReply(cmd *goredis.Cmd, execErr error) ([]string, error) {
	v, err := cmd.Result()
	if err != nil {
		return nil, err
	}
	reply, ok := v.([]any)
	if !ok || len(reply) == 0 {
		return nil, notAppended(fmt.Sprint(v), execErr)
	}
	list, ok := reply[0].([]any)
	if !ok {
		return nil, notAppended(fmt.Sprint(v), execErr)
	}
	ids := make([]string, 0, len(list))
	for _, e := range list {
		id, ok := e.(string)
		if !ok || !isEntryID(id) {
			return ids, notAppended(fmt.Sprint(e), execErr)
		}
		ids = append(ids, id)
	}
	if len(reply) < 2 {
		return ids, nil
	}
	msg, ok := reply[1].(string)
	if !ok {
		return ids, notAppended(fmt.Sprint(reply[1]), execErr)
	}
	return ids, serverError(msg)
}

// serverError is the error an XADD of appendRun returned, as Redis
// replied it (so classify reads it as a reply from Redis).
type serverError string

func (e serverError) Error() string { return string(e) }
func (serverError) RedisError()     {}

var _ goredis.Error = serverError("")
