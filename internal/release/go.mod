// dlock:unpublished: the release tooling (scripts/release, scripts/publish-check).
module github.com/dlock-go/dlock/internal/release

go 1.26.0

require golang.org/x/mod v0.42.0
