module github.com/dlock-go/dlock/natslock

go 1.26.0

require github.com/dlock-go/dlock v0.0.0-20261126022123-99c02b3cd452

require (
	github.com/klauspost/compress v1.20.0 // indirect
	github.com/nats-io/nats.go v1.55.0 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	golang.org/x/crypto v0.57.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

// Development inside the repository: scripts/release requires the tagged
// version of each module instead and drops these replaces when it tags.
replace github.com/dlock-go/dlock => ..
