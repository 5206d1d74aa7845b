package valkeyredis

// The adapter is written for rueidis, of which valkey-go is a fork with
// the same API: its files here are generated from rueidisredis's.
//go:generate go run ./internal/gen
