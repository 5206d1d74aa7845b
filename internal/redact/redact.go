// Package redact hides the password of a store URL, in the URL's text
// and in errors that quote parts of it, for package dlock's Open and for
// backend packages (through backend.RedactURL).
package redact

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// URL returns rawURL with any password replaced by "xxxxx", also
// when rawURL does not parse or parses in a way its writer did not mean: a
// password with an unescaped '#', '?' or '/' ends the URL's authority
// early, so url.Parse sees no password at all, yet the text shows it.
// Beyond what url.Parse calls the password, everything from the first ':'
// after "://" to the last '@' is hidden when both exist: that may hide
// more than a password (a host's port, when a query holds an '@'), never
// less.
func URL(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil {
		if _, has := u.User.Password(); has {
			rawURL = u.Redacted()
		}
	}
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return rawURL
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return rawURL
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return rawURL
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

// secrets returns what URL hides in rawURL, as it appears in the
// text and, for url.Parse's password, decoded too: the strings an error
// about rawURL must not show. Strings under 4 bytes are left out (hiding
// every "ab" in a message would garble it and protect nothing).
func secrets(rawURL string) []string {
	var out []string
	add := func(s string) {
		if len(s) >= 4 {
			out = append(out, s)
		}
	}
	if u, err := url.Parse(rawURL); err == nil {
		if p, has := u.User.Password(); has {
			add(p)
		}
	}
	// Where a password ends is ambiguous in a URL that does not parse as
	// its writer meant: take every candidate, from the first ':' after
	// "://" to each '@' after it, as it is and as %q shows it; longest
	// first, so that a shorter one does not break a longer one up.
	if _, rest, ok := strings.Cut(rawURL, "://"); ok {
		if colon := strings.IndexByte(rest, ':'); colon >= 0 {
			for i := colon + 1; i < len(rest); i++ {
				if rest[i] == '@' {
					p := rest[colon+1 : i]
					add(p)
					if q := strconv.Quote(p); q[1:len(q)-1] != p {
						add(q[1 : len(q)-1])
					}
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// Error returns err with its message cleared of rawURL's password (see
// URL), for errors that quote parts of a URL (a query parameter's
// name, a parser's complaint). errors.Is and errors.As see err.
func Error(err error, rawURL string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	scrubbed := msg
	for _, s := range secrets(rawURL) {
		scrubbed = strings.ReplaceAll(scrubbed, s, "xxxxx")
	}
	if scrubbed == msg {
		return err
	}
	return scrubbedError{msg: scrubbed, err: err}
}

type scrubbedError struct {
	msg string
	err error
}

func (e scrubbedError) Error() string { return e.msg }
func (e scrubbedError) Unwrap() error { return e.err }
