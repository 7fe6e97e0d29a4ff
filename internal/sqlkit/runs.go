package sqlkit

// The SQL stores share one policy for ordered claims with runs
// (stores.ClaimParams.PerKey): heads first, from a key walk of at most
// HeadLimit keys; unkeyed rows next, in UnkeyedRoom; the rest to the runs
// behind the heads, RunLength rows each at most.

// HeadLimit is how many heads the key walk of an ordered claim of limit
// takes: limit, or with runs (perKey > 1) a quarter of it; when the runs
// are pipelined (stores.ClaimParams.Pipelined), a hundredth of it, but as
// many as a quarter up to 10 (so a small batch still spreads over a few
// keys: 10 of 100, 10 of 1,000, 100 of 10,000). The cap leaves keys to a
// relay's other workers and to other relays, which would otherwise find
// every key held by one batch when there are about as many keys as a
// batch takes, and it spreads the walk's cost (a few index probes per key)
// over the rows of each key's run; a claim whose heads' runs are too short
// to fill it reads on for more keys (see the stores' claims). A pipelined
// run goes out in one call, so fewer, longer runs cost nothing in publish
// round trips, and they save a publisher whose requests are per key
// (Pub/Sub's ordering keys: a request per key and call) requests:
// PostgreSQL, 1,000 keys, ordered ÷ unordered, NATS fast-ingest batches
// 0.63 with a quarter, 0.80 with a tenth, 0.81–0.85 with a twentieth and
// 0.85–0.92 with a hundredth; Pub/Sub (the emulator) 0.63–0.69 with a
// twentieth and 0.86–0.91 with a hundredth. Without pipelining each record
// of a run is a round of publishes, so a quarter (more keys, shorter runs)
// keeps the rounds few.
func HeadLimit(limit, perKey int, pipelined bool) int {
	switch {
	case perKey <= 1:
		return limit
	case pipelined:
		return max(1, limit/100, min(limit/4, 10))
	}
	return max(1, limit/4)
}

// UnkeyedRoom is how much of room, what the heads left of a batch, unkeyed
// rows may take: all of it, or with runs half (rounded up), the other half
// being the runs'. The runs take whatever the unkeyed rows leave.
func UnkeyedRoom(room int, runs bool) int {
	if runs {
		return room - room/2
	}
	return room
}

// RunLength is the most rows a claim takes behind each of heads heads (at
// least one) when room is left for their runs: an even share of room,
// rounded up, and at most perKey-1, so a key's run and its head stay within
// perKey.
func RunLength(room, heads, perKey int) int {
	return min(perKey-1, (room+heads-1)/heads)
}
