package sns_test

import (
	"context"
	"fmt"
	"log"

	"github.com/outboxgo/outbox/sns"
)

// A relay configured by URL: the account and region of the topics in the
// host, the topic prefix in the path, settings in the query; credentials
// come from the SDK's default chain. Outbox topic T goes to the SNS topic
// TOPIC_PREFIX+T (.fifo added with fifo=true).
func ExampleConfigFromURL() {
	cfg, err := sns.ConfigFromURL("sns://123456789012.eu-west-1/orders-?fifo=true")
	if err != nil {
		log.Fatal(err)
	}
	pub, err := sns.NewPublisher(context.Background(), cfg) // calls nothing yet: Check would
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	fmt.Println(pub.TopicARN("placed"))

	_, err = sns.ConfigFromURL("sns://eu-west-1/orders-")
	fmt.Println(err)
	// Output:
	// arn:aws:sns:eu-west-1:123456789012:orders-placed.fifo
	// sns publisher: URL sns://eu-west-1/orders-: host "eu-west-1": want ACCOUNT.REGION, the 12 digits of the account owning the topics and its region (sns://123456789012.eu-west-1/TOPIC_PREFIX)
}
