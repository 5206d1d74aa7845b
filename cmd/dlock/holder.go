package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
)

// holderMetadata is what run and lead store with the lock about
// themselves, for status, observe and other runs' conflict lines to show
// anyone who can read the store: "host=H pid=P", as Redisson and consul
// lock describe a holder; with withCommand (--record-command), also
// "cmd=" and the command line, with the password of every URL in it
// hidden. A command line often carries secrets, so it is stored only when
// asked for.
func holderMetadata(argv []string, withCommand bool) string {
	host, _ := os.Hostname()
	meta := fmt.Sprintf("host=%s pid=%d", host, os.Getpid())
	if withCommand {
		args := make([]string, len(argv))
		for i, a := range argv {
			// A URL ("postgres://u:pw@db/x"), a flag holding one
			// ("--url=..."), a script quoting one: beyond the password
			// of a URL that parses, RedactURL hides everything from the
			// first ':' after the first "://" to the last '@', so
			// possibly more than passwords, never less, however many
			// URLs the argument holds. Secrets given otherwise
			// (-p PASSWORD, PGPASSWORD=...) are not found: hence
			// --record-command is off by default.
			args[i] = backend.RedactURL(a)
		}
		meta += " cmd=" + strings.Join(args, " ")
	}
	if len(meta) > dlock.MaxMetadataLen {
		meta = meta[:dlock.MaxMetadataLen]
	}
	return strings.ToValidUTF8(meta, "?") // argv need not be UTF-8; metadata must
}
