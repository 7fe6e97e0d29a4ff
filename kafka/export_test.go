package kafka

// WritesWaiting returns how many of p's writes to the brokers wait at
// the write gates of its key runs' clients.
func WritesWaiting(p *Publisher) int64 { return p.lanes.writesWaiting() }
