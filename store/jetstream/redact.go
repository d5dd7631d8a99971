package jetstream

import (
	"net/url"
	"strings"
)

// RedactedURLs is a comma-separated list of NATS URLs with their passwords
// (and tokens) replaced: the start's line and logs are no place for them.
func RedactedURLs(list string) string {
	urls := strings.Split(list, ",")
	for i, u := range urls {
		if parsed, err := url.Parse(strings.TrimSpace(u)); err == nil && parsed.User != nil {
			if _, hasPassword := parsed.User.Password(); !hasPassword {
				parsed.User = url.User("xxxxx") // a token alone
			}
			urls[i] = parsed.Redacted()
		}
	}
	return strings.Join(urls, ",")
}
