package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func newStatusCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "status [flags] [NAME...]",
		Short: "Show who holds locks",
		Long: `Status shows, for each NAME (or every held lock when none is given), its
fencing token, the lease left on the server, the holder's owner id and what
it said about itself (host, pid, command), where the store can tell.`,
		RunE: func(cmd *cobra.Command, names []string) error {
			l, _, err := openStore(cmd.Context(), cmd)
			if err != nil {
				return err
			}
			defer l.Close()
			infos, err := l.Inspect(cmd.Context(), names...)
			if err != nil {
				return err
			}
			held := map[string]bool{}
			for _, i := range infos {
				held[i.Name] = true
			}
			out := cmd.OutOrStdout()
			if asJSON {
				type entry struct {
					Name        string `json:"name"`
					Held        bool   `json:"held"`
					Fence       uint64 `json:"fence,omitempty,string"`
					RemainingMS int64  `json:"remaining_ms,omitempty"`
					Owner       string `json:"owner,omitempty"`
					Metadata    string `json:"metadata,omitempty"`
				}
				list := []entry{}
				for _, i := range infos {
					list = append(list, entry{i.Name, true, i.Fence, i.Remaining.Milliseconds(), i.Owner, i.Metadata})
				}
				for _, n := range names {
					if !held[n] {
						list = append(list, entry{Name: n})
					}
				}
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(list)
			}
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tFENCE\tLEASE LEFT\tOWNER\tHOLDER")
			for _, i := range infos {
				fmt.Fprintf(w, "%q\t%d\t%v\t%s\t%s\n", i.Name, i.Fence, i.Remaining.Round(time.Millisecond), i.Owner, i.Metadata)
			}
			for _, n := range names {
				if !held[n] {
					fmt.Fprintf(w, "%q\t-\t-\t(free)\t\n", n)
				}
			}
			return w.Flush()
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}
