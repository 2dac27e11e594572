package main

import (
	"fmt"
	"runtime/debug"
)

// versionString is the module version (or the -ldflags version) with the VCS
// commit the binary was built from, when the build recorded one.
func versionString() string {
	v, commit, dirty := version, "", false
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
