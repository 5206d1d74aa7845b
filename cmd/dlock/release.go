package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dlock-go/dlock/driver"
)

func newReleaseCmd() *cobra.Command {
	var force bool
	c := &cobra.Command{
		Use:   "release --force NAME",
		Short: "Free a lock whatever its holder (administrator's override)",
		Long: `Release --force frees the lock NAME whatever its holder: the administrator's
override for a holder that is stuck. The holder learns of it at its next
renewal; a "dlock run" holding it then stops its command. Without --force
nothing is done: a lock belongs to its holder, which releases it itself.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !force {
				return fail(exitUsage, "refusing to release %q without --force: a lock belongs to its holder; --force frees it whatever the holder does", name)
			}
			if err := driver.ValidateName(name); err != nil {
				return badName("release", name, err)
			}
			s, err := chooseStore(cmd)
			if err != nil {
				return err
			}
			l, err := connect(cmd.Context(), s, connectTimeout(cmd))
			if err != nil {
				return err
			}
			defer l.Close()
			held, err := l.ForceRelease(cmd.Context(), name)
			if err != nil {
				return storeFailed(s, err)
			}
			if held {
				fmt.Fprintf(cmd.OutOrStdout(), "released %q on %s (forced)\n", name, s.shown)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "%q was not held on %s\n", name, s.shown)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&force, "force", false, "free the lock whatever its holder")
	return c
}
