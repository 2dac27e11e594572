package main

import (
	"encoding/json"
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func versionCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print the version and commit (--json for scripts)",
		Args:  posArgs(0, 0),
		Run: func(*cobra.Command, []string) {
			if !a.g.json {
				fmt.Fprintln(a.stdout, versionString())
				return
			}
			v, commit, dirty := buildInfo()
			b, _ := json.MarshalIndent(map[string]any{"version": v, "commit": commit, "modified": dirty, "go": goVersion()}, "", "  ")
			fmt.Fprintf(a.stdout, "%s\n", b)
		},
	}
}

// buildInfo is the module version (or the -ldflags version) and the VCS
// commit the binary was built from, when the build recorded one.
func buildInfo() (v, commit string, dirty bool) {
	v = version
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	return v, commit, dirty
}

// versionString is buildInfo for people.
func versionString() string {
	v, commit, dirty := buildInfo()
	s := "regent " + v
	if commit != "" {
		if len(commit) > 12 {
			commit = commit[:12]
		}
		s += " (commit " + commit
		if dirty {
			s += ", modified"
		}
		s += ")"
	}
	return fmt.Sprintf("%s %s", s, goVersion())
}

func goVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.GoVersion
	}
	return ""
}
