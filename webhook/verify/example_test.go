package verify_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/outboxgo/outbox/webhook/verify"
)

// A receiver checks a request's signature and timestamp and gets the
// event ID, its dedup key. (The request here is the specification's test
// vector, so the clock is set to its time.)
func ExampleVerifier_Verify() {
	v, err := verify.New("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		fmt.Println(err)
		return
	}
	v.Now = func() time.Time { return time.Unix(1614265330, 30) }
	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	id, err := v.Verify(h, []byte(`{"test": 2432232314}`))
	fmt.Println(id, err)

	_, err = v.Verify(h, []byte(`{"test": 2432232315}`))
	fmt.Println(err)
	// Output:
	// msg_p5jXN8AQM9LWM0D4loKWxJek <nil>
	// no webhook signature matches (Webhook-Id msg_p5jXN8AQM9LWM0D4loKWxJek: none of its 1 signatures is a v1 signature by one of the 1 secrets)
}
