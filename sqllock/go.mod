module github.com/dlock-go/dlock/sqllock

go 1.26.0

require (
	github.com/dlock-go/dlock v0.0.0-20261126022123-99c02b3cd452
	github.com/go-sql-driver/mysql v1.10.1
	github.com/jackc/pgx/v5 v5.12.0
	golang.org/x/sys v0.49.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)

// Development inside the repository: scripts/release requires the tagged
// version of each module instead and drops these replaces when it tags.
replace github.com/dlock-go/dlock => ..
