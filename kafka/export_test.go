package kafka

// WritesWaiting returns how many of p's writes to the brokers wait at
// the write gates of its key runs' clients.
func WritesWaiting(p *Publisher) int64 {
	ls := p.lanes
	ls.mu.Lock()
	defer ls.mu.Unlock()
	var n int64
	for _, l := range ls.all {
		n += l.gate.waiting.Load()
	}
	return n
}
