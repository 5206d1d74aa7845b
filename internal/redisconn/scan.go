package redisconn

import (
	"context"
	"fmt"
)

// Scan returns the keys of c's node that match pattern (SCAN with MATCH,
// a thousand at a time), each once. On a Cluster, call it on each of
// Masters.
func Scan(ctx context.Context, c Conn, pattern string) ([]string, error) {
	var keys []string
	seen := make(map[string]bool)
	cursor := "0"
	for {
		page, err := c.Pipeline(ctx, []Cmd{{Name: []string{"scan", cursor, "match", pattern, "count", "1000"}}})[0].Slice()
		if err != nil {
			return nil, err
		}
		if len(page) != 2 {
			return nil, fmt.Errorf("redis: scan: unexpected reply %v", page)
		}
		cursor, _ = page[0].(string)
		found, _ := page[1].([]any)
		for _, k := range found {
			if k, ok := k.(string); ok && !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
		if cursor == "0" || cursor == "" {
			return keys, nil
		}
	}
}
