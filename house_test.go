package dlock_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// coreFiles parses the root package's non-test files.
func coreFiles(t *testing.T) (*token.FileSet, map[string]*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	files := make(map[string]*ast.File)
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = f
	}
	return fset, files
}

// The adversary is a maintainer who adds, renames or removes a file of
// the core without the file list in doc.go: the list then sends the next
// reader to the wrong room. Every file is listed once, and every listed
// file exists.
func TestDocListsEveryFile(t *testing.T) {
	_, files := coreFiles(t)
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, m := range regexp.MustCompile(`(?m)^//\t([a-z_]+\.go) `).FindAllStringSubmatch(string(doc), -1) {
		listed = append(listed, m[1])
	}
	var have []string
	for name := range files {
		have = append(have, name)
	}
	slices.Sort(have)
	sorted := slices.Sorted(slices.Values(listed))
	if !slices.Equal(sorted, slices.Compact(slices.Clone(sorted))) {
		t.Errorf("doc.go lists a file twice: %v", listed)
	}
	if !slices.Equal(slices.Compact(sorted), have) {
		t.Errorf("doc.go lists %v; the package's files are %v", sorted, have)
	}
}

// The adversary is a function that grows until a reader cannot hold it:
// none in the core is longer than 60 lines.
func TestNoLongFunctions(t *testing.T) {
	fset, files := coreFiles(t)
	for name, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > 60 {
				t.Errorf("%s: func %s is %d lines, want at most 60", name, fn.Name.Name, n)
			}
		}
	}
}

// maxExportedNames is the root package's budget of exported names,
// methods of exported types included (issue 25: "go doc lists locking
// first and at most 50 exported names").
const maxExportedNames = 50

// TestExportedNamesBudget: the adversary is the slow growth of the root
// package's namespace, each addition reasonable on its own: a backend's
// helper or a limit that belongs in package driver or backend, until go
// doc no longer reads as a locking API. It counts every exported
// constant, variable, type, function and method of an exported type.
func TestExportedNamesBudget(t *testing.T) {
	_, files := coreFiles(t)
	var names []string
	for _, f := range files {
		for _, d := range f.Decls {
			names = append(names, exportedNames(d)...)
		}
	}
	if len(names) > maxExportedNames {
		slices.Sort(names)
		t.Errorf("the root package exports %d names, over the budget of %d: %s", len(names), maxExportedNames, strings.Join(names, ", "))
	}
}

// exportedNames returns the exported names d declares, methods as
// Type.Method (only those of exported types).
func exportedNames(d ast.Decl) []string {
	var out []string
	switch d := d.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() {
			return nil
		}
		if d.Recv == nil {
			return []string{d.Name.Name}
		}
		typ := d.Recv.List[0].Type
		if star, ok := typ.(*ast.StarExpr); ok {
			typ = star.X
		}
		if id, ok := typ.(*ast.Ident); ok && id.IsExported() {
			out = append(out, id.Name+"."+d.Name.Name)
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() {
					out = append(out, s.Name.Name)
				}
			case *ast.ValueSpec:
				for _, id := range s.Names {
					if id.IsExported() {
						out = append(out, id.Name)
					}
				}
			}
		}
	}
	return out
}
