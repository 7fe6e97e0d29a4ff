package sqlkit

import "sync"

// KeyCursor remembers where the last ordered claim stopped, so that the
// next one starts after it: keys are served round-robin, and a busy key
// cannot starve the others.
type KeyCursor struct {
	mu  sync.Mutex
	key string
}

// Get returns the key the next claim starts after ("" for the start).
func (c *KeyCursor) Get() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.key
}

// Set makes the next claim start after key.
func (c *KeyCursor) Set(key string) {
	c.mu.Lock()
	c.key = key
	c.mu.Unlock()
}

// Advance moves the cursor past the keys just claimed, from a claim that
// started after from, when the batch was full (there may be more keys
// after them), and back to the start when it was not (every key was
// visited). Empty keys are ignored.
func (c *KeyCursor) Advance(from string, full bool, keys []string) {
	next := ""
	if full {
		for _, k := range keys {
			if k != "" && (next == "" || keyAfter(k, next, from)) {
				next = k
			}
		}
	}
	c.Set(next)
}

// keyAfter reports whether a comes after b in a round-robin visit that
// started after from: keys above from come before keys at or below it.
func keyAfter(a, b, from string) bool {
	aHigh, bHigh := a > from, b > from
	if aHigh != bHigh {
		return !aHigh
	}
	return a > b
}
