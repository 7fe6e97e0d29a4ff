package kafka

// WritesWaiting returns how many of p's writes to the brokers wait at
// its write gate.
func WritesWaiting(p *Publisher) int64 { return p.gate.waiting.Load() }
