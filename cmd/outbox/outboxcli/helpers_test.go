package outboxcli_test

import "regexp"

func regexpMatch(s, re string) bool { return regexp.MustCompile(re).MatchString(s) }
