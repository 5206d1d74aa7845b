// Command release pins, tags and checks the modules of the dlock
// repository.
//
//	release modules              list the modules, published first
//	release pin VERSION          require VERSION of every module of the repository, without the replaces
//	release require VERSION      require VERSION of every module of the repository, keeping the replaces
//	release check [VERSION]      the publication test: a file module proxy from the tree, used from outside
//
// scripts/release and scripts/publish-check run it.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: release modules | pin VERSION | require VERSION | check [VERSION]")
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	switch args[0] {
	case "modules":
		mods, err := findModules(root)
		if err != nil {
			return err
		}
		for _, m := range mods {
			fmt.Printf("%s\t%s\tpublished=%v\n", m.Dir, m.Path, m.Published)
		}
		return nil
	case "pin", "require":
		if len(args) != 2 {
			return fmt.Errorf("usage: release %s VERSION", args[0])
		}
		return pinTree(root, args[1], args[0] == "pin")
	case "check":
		version := ""
		if len(args) > 1 {
			version = args[1]
		}
		return check(root, version)
	}
	return fmt.Errorf("unknown command %q", args[0])
}
