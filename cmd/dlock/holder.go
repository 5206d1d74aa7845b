package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/dlock-go/dlock/backend"
	"github.com/dlock-go/dlock/driver"
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
	if len(meta) > driver.MaxMetadataLen {
		meta = meta[:driver.MaxMetadataLen]
	}
	return strings.ToValidUTF8(meta, "?") // argv need not be UTF-8; metadata must
}

// printable returns text a holder wrote to the store (its metadata or
// owner) for a terminal or a table: escaped as strconv.Quote escapes it,
// which is how observe and every lock name are printed (%q), without the
// quotes. Control characters (ESC, the one-byte CSI U+009B, a newline)
// become \x1b, \u009b, \n: none reaches the terminal and none starts a
// line of its own.
func printable(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// writeJSON writes v to out as one JSON value and a newline, indented or
// not, with the C1 control characters (U+0080 to U+009F), which
// encoding/json leaves as they are, escaped too: some terminals obey
// U+009B as CSI, and JSON is read on terminals.
func writeJSON(out io.Writer, v any, indent bool) error {
	var b []byte
	var err error
	if indent {
		b, err = json.MarshalIndent(v, "", "  ")
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		return err
	}
	var buf strings.Builder
	for _, r := range string(b) { // encoding/json writes valid UTF-8
		if r >= 0x80 && r <= 0x9f {
			fmt.Fprintf(&buf, `\u%04x`, r)
			continue
		}
		buf.WriteRune(r)
	}
	buf.WriteByte('\n')
	_, err = io.WriteString(out, buf.String())
	return err
}
