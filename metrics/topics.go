package metrics

import "sync"

// topicLabels bounds the topic label's values: an allow-list, or the first
// max distinct topics seen; every other topic is OtherTopic.
type topicLabels struct {
	allow map[string]bool // nil: capped
	max   int             // negative: no cap

	mu   sync.RWMutex
	seen map[string]bool
}

func newTopicLabels(allow []string, limit int) *topicLabels {
	t := &topicLabels{max: limit, seen: map[string]bool{}}
	if len(allow) > 0 {
		t.allow = map[string]bool{}
		for _, a := range allow {
			t.allow[a] = true
		}
	}
	return t
}

// label returns topic's label value.
func (t *topicLabels) label(topic string) string {
	switch {
	case topic == "":
		return OtherTopic
	case t.allow != nil:
		if t.allow[topic] {
			return topic
		}
		return OtherTopic
	case t.max < 0:
		return topic
	}
	t.mu.RLock()
	ok, n := t.seen[topic], len(t.seen)
	t.mu.RUnlock()
	if ok {
		return topic
	}
	if n >= t.max {
		return OtherTopic
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen[topic] {
		return topic
	}
	if len(t.seen) >= t.max {
		return OtherTopic
	}
	t.seen[topic] = true
	return topic
}
