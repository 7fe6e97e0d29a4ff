package nats

// FastBatches returns how many fast-ingest batches p has started.
func FastBatches(p *Publisher) uint64 {
	a := p.acks.Load()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.nextFast
}
