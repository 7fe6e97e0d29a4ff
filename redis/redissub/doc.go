// Package redis feeds an inbox.Inbox from Redis streams through a consumer
// group: the consumer side of publishers/redis.
//
//	in := inbox.New(inboxDriver, nil)
//	sub, _ := redis.New(rdb, in, handler, redis.Config{
//		Streams: []string{"events:orders"}, StreamPrefix: "events:",
//		Group: "billing", DeadLetterStream: "dead:billing",
//	})
//	_ = sub.Start(ctx)
//	defer sub.Stop(ctx)
//
// # Delivery
//
// New entries are read with XREADGROUP … BLOCK, as many at a time as there
// are free handler slots (Config.Concurrency). Each entry runs through
// Inbox.Handle: the handler's effect and the entry's inbox record commit in
// one transaction, and only then is the entry acknowledged (XACK). A
// duplicate — an entry whose event ID the inbox holds already — is
// acknowledged without running the handler. A crash between commit and
// XACK leaves the entry pending; it is claimed again and dropped by the
// inbox as a duplicate.
//
// A failed handler leaves its entry pending: Redis has no negative
// acknowledgement. The subscriber sets the entry's idle time (XCLAIM … IDLE
// … JUSTID, which does not count a delivery, in a script that first checks
// with XPENDING that this consumer still owns the entry) so that it reaches
// Config.ClaimIdle after the backoff (Config.Backoff, doubling with each
// delivery), and every instance of the group claims entries idle for
// ClaimIdle with XAUTOCLAIM, every Config.PollInterval, and again as soon
// as a handler slot is free while a claim fills every free slot (a backlog
// of due entries drains at the handlers' pace). The delivery count
// is the entry's XPENDING counter. While a handler runs its entry is kept
// alive (its idle time reset) every ClaimIdle/3, so a slow handler is not
// claimed by another instance; an entry whose consumer crashed is claimed
// ClaimIdle after its last keep-alive. Hence Backoff.Max may not exceed
// ClaimIdle.
//
// After Config.MaxDeliveries deliveries, or at once for an error marked
// inbox.Permanent or an entry without a usable id field, the entry is added
// to Config.DeadLetterStream — its fields plus FieldError and the
// FieldDead* fields — and then acknowledged. An entry delivered more than
// MaxDeliveries times (its earlier deliveries ended in a crash) is
// dead-lettered without running the handler again, unless the inbox shows
// it was handled. The XADD and the XACK are two commands: when the XACK is
// lost the entry may be dead-lettered twice.
//
// # Errors
//
// Start creates the consumer group on each stream (XGROUP CREATE … MKSTREAM,
// BUSYGROUP ignored); it is the first command the subscriber sends, so a
// client Redis refuses fails Start at once. When the refusal is of the
// configuration — wrong credentials (WRONGPASS, NOAUTH, ERR AUTH), no
// permission (NOPERM), an unknown database (ERR DB index is out of range)
// — the error wraps ErrRefused: retrying does not help until someone fixes
// the configuration. Other errors (Redis unreachable) are returned as they
// are; retrying Start is the caller's choice. Once running, the subscriber
// retries failed reads by itself: an outage is logged as a warning, a
// refusal (credentials changed under it) as an error, every second, until
// it is fixed. The client is the caller's: how it connects (URL,
// password, database, TLS) is set there.
//
// # Stop
//
// Stop stops reading and claiming, lets in-flight handlers finish and
// acknowledges their entries. Entries read but not yet started, and those
// whose handler a hard Stop cut short, are left pending with their idle
// time at ClaimIdle: another instance claims them at once. Several
// instances may share one group; the inbox catches the deliveries that
// overlap (a handler that outlived a keep-alive that came too late).
package redis
