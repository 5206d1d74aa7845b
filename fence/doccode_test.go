package fence_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocCodeKeyed checks the Go in this package's doc comments: each
// indented block that parses as an expression writes its fence structs
// with keyed fields. The adversary is an example a reader copies: go vet
// (composites) refuses unkeyed fields of another package's struct, and
// vet never sees a doc comment.
func TestDocCodeKeyed(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, block := range docCodeBlocks(string(src)) {
			e, err := parser.ParseExpr(block)
			if err != nil {
				continue // a statement, SQL or a shell line: not an expression
			}
			checked++
			for _, lit := range unkeyedStructs(e) {
				t.Errorf("%s: doc code %q has an unkeyed field at offset %d", f, block, lit)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no doc code block parsed as Go: the scan found nothing to check")
	}
}

// docCodeBlocks returns the indented blocks ("//\t...") of the comments
// in src, each joined into one text.
func docCodeBlocks(src string) []string {
	var blocks []string
	var cur []string
	for _, line := range strings.Split(src, "\n") {
		if code, ok := strings.CutPrefix(line, "//\t"); ok {
			cur = append(cur, code)
			continue
		}
		if len(cur) > 0 {
			blocks = append(blocks, strings.Join(cur, "\n"))
			cur = nil
		}
	}
	return blocks
}

// unkeyedStructs returns the offsets of the literals in e of a struct of
// package fence (fence.X{...}, or an element of []fence.X{...} with its
// type elided) that list a value without its field name.
func unkeyedStructs(e ast.Expr) []token.Pos {
	var bad []token.Pos
	var visit func(n ast.Node, elided bool) bool
	visit = func(n ast.Node, elided bool) bool {
		lit, ok := n.(*ast.CompositeLit)
		if !ok {
			return true
		}
		_, isSlice := lit.Type.(*ast.ArrayType)
		if (elided || isFenceType(lit.Type)) && !isSlice {
			for _, el := range lit.Elts {
				if _, kv := el.(*ast.KeyValueExpr); !kv {
					bad = append(bad, el.Pos())
				}
			}
		}
		for _, el := range lit.Elts {
			if kv, ok := el.(*ast.KeyValueExpr); ok {
				el = kv.Value
			}
			at, _ := lit.Type.(*ast.ArrayType)
			ast.Inspect(el, func(m ast.Node) bool { return visit(m, at != nil && isFenceType(at.Elt) && m == el) })
		}
		return false
	}
	ast.Inspect(e, func(n ast.Node) bool { return visit(n, false) })
	return bad
}

// isFenceType reports whether t names a type of package fence.
func isFenceType(t ast.Expr) bool {
	sel, ok := t.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && x.Name == "fence"
}
