package dlock_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// These tests guard the front door against two adversaries: a README that
// regrows past its budget, or whose first code block after the two
// commands stops being the Go quick start, as references creep back into
// it; and a page moved, renamed or retitled without the links to it, which
// leaves a reader on GitHub facing a 404 or a dead anchor.

// readmeBudget is the README's size limit in bytes: long references belong
// in docs/.
const readmeBudget = 20_000

// The two commands the README leads with (the demo and every test).
const (
	demoCommand = "go -C cmd/dlock run . demo"
	testCommand = "./scripts/test"
)

// TestReadmeBudget fails when README.md has grown to the budget or past it.
func TestReadmeBudget(t *testing.T) {
	fi, err := os.Stat("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() >= readmeBudget {
		t.Errorf("README.md is %d bytes, want under %d: move long references to docs/", fi.Size(), readmeBudget)
	}
}

// TestReadmeQuickStartIsGo: the first code block is the two commands, and
// the one after it is Go, the quick start.
func TestReadmeQuickStartIsGo(t *testing.T) {
	src, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := fencedBlocks(string(src))
	if len(blocks) < 2 {
		t.Fatalf("README.md has %d fenced code blocks, want at least 2 (the two commands, then the Go quick start)", len(blocks))
	}
	first := blocks[0].body
	if !strings.Contains(first, demoCommand) || !strings.Contains(first, testCommand) {
		t.Errorf("README.md's first code block = %q, want the commands %q and %q", first, demoCommand, testCommand)
	}
	if got := blocks[1].info; got != "go" {
		t.Errorf("README.md's code block after the two commands is ```%s (line %d), want ```go", got, blocks[1].line)
	}
}

// TestDocLinks: every relative link in README.md, docs/*.md and the
// packages' DESIGN.md pages names a file or directory of the repository,
// and every anchor names a heading of the Markdown page it points to.
func TestDocLinks(t *testing.T) {
	pages := []string{"README.md"}
	for _, pattern := range []string{"docs/*.md", "*/DESIGN.md"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, m...)
	}
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, page := range pages {
		src, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(string(src)) {
			checked++
			if err := checkLink(root, page, l.target); err != nil {
				t.Errorf("%s:%d: link %q: %v", page, l.line, l.target, err)
			}
		}
	}
	if checked == 0 {
		t.Errorf("found no links in %v, want the README's links to docs/ at least: the link parser is broken", pages)
	}
}

// checkLink resolves target, a link found in page, and returns why it does
// not resolve, or nil. External links are not followed.
func checkLink(root, page, target string) error {
	for _, p := range []string{"http://", "https://", "mailto:"} {
		if strings.HasPrefix(strings.ToLower(target), p) {
			return nil
		}
	}
	if strings.Contains(target, "://") {
		return fmt.Errorf("a URL scheme other than http, https or mailto")
	}
	path, anchor, _ := strings.Cut(target, "#")
	file := page
	if path != "" {
		file = filepath.Join(filepath.Dir(page), filepath.FromSlash(path))
		abs, err := filepath.Abs(file)
		if err != nil {
			return err
		}
		if rel, err := filepath.Rel(root, abs); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return fmt.Errorf("resolves to %s, outside the repository", abs)
		}
		fi, err := os.Stat(file)
		if err != nil {
			return fmt.Errorf("resolves to %s, which does not exist", file)
		}
		if fi.IsDir() || anchor == "" {
			return nil
		}
	}
	if anchor == "" || !strings.HasSuffix(file, ".md") {
		return nil
	}
	src, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if !headingAnchors(string(src))[anchor] {
		return fmt.Errorf("no heading of %s has the anchor #%s", file, anchor)
	}
	return nil
}

type fenced struct {
	info string // the word after the opening fence, such as "go"
	body string
	line int // 1-based line of the opening fence
}

// fencedBlocks returns the Markdown fenced code blocks of src, in order.
func fencedBlocks(src string) []fenced {
	var blocks []fenced
	var cur *fenced
	var fence string
	for i, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(line)
		if cur == nil {
			if f := fenceOf(trimmed); f != "" {
				fence = f
				cur = &fenced{info: strings.TrimSpace(strings.TrimLeft(trimmed, f[:1])), line: i + 1}
			}
			continue
		}
		if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
			blocks = append(blocks, *cur)
			cur = nil
			continue
		}
		cur.body += line + "\n"
	}
	return blocks
}

// fenceOf returns the fence that line opens (``` or ~~~, or longer), or "".
func fenceOf(line string) string {
	for _, c := range []string{"`", "~"} {
		n := len(line) - len(strings.TrimLeft(line, c))
		if n >= 3 {
			return strings.Repeat(c, n)
		}
	}
	return ""
}

type link struct {
	target string
	line   int
}

var (
	inlineLink = regexp.MustCompile(`\]\(\s*<?([^()\s<>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refLink    = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
)

// markdownLinks returns the targets of the inline and reference links of
// src, outside code blocks and code spans.
func markdownLinks(src string) []link {
	var links []link
	proseLines(src, func(i int, line string) {
		text := codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(text, -1) {
			links = append(links, link{target: m[1], line: i + 1})
		}
		if m := refLink.FindStringSubmatch(text); m != nil {
			links = append(links, link{target: m[1], line: i + 1})
		}
	})
	return links
}

// proseLines calls fn with each line of src (and its index) that is not
// inside a fenced code block.
func proseLines(src string, fn func(i int, line string)) {
	inFence := ""
	for i, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(line)
		if inFence != "" {
			if strings.HasPrefix(trimmed, inFence) && strings.Trim(trimmed, inFence[:1]) == "" {
				inFence = ""
			}
			continue
		}
		if f := fenceOf(trimmed); f != "" {
			inFence = f
			continue
		}
		fn(i, line)
	}
}

// headingAnchors returns the anchors GitHub gives the ATX headings of src:
// lower case, spaces to hyphens, punctuation other than '-' and '_'
// dropped, and "-1", "-2", ... appended to repeats.
func headingAnchors(src string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	proseLines(src, func(_ int, line string) {
		text, ok := strings.CutPrefix(line, "#")
		if !ok {
			return
		}
		text = strings.TrimLeft(text, "#")
		if text != "" && text[0] != ' ' {
			return
		}
		slug := slugify(strings.TrimSpace(text))
		if n := seen[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	})
	return anchors
}

// slugify turns a heading's text into its anchor, as GitHub does.
func slugify(heading string) string {
	heading = strings.ReplaceAll(heading, "`", "")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
