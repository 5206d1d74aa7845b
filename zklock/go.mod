module github.com/dlock-go/dlock/zklock

go 1.26.0

require (
	github.com/dlock-go/dlock v0.0.0-20261126022123-99c02b3cd452
	github.com/go-zookeeper/zk v1.0.4
)

// Development inside the repository: scripts/release requires the tagged
// version of each module instead and drops these replaces when it tags.
replace github.com/dlock-go/dlock => ..
