package main

import (
	"flag"
	"io"
	"os"
)

// setting is one configuration value: a flag, the environment variable that
// sets it, its default and its help. The environment overrides the default;
// a flag given on the command line overrides the environment.
type setting struct {
	flag, env, def, help string
}

// settings binds a list of settings to a FlagSet and reads them back.
type settings struct {
	fs   *flag.FlagSet
	vals map[string]*string
	list []setting
}

func newSettings(name string, out io.Writer, list []setting) *settings {
	s := &settings{fs: flag.NewFlagSet(name, flag.ContinueOnError), vals: map[string]*string{}, list: list}
	s.fs.SetOutput(out)
	for _, st := range list {
		def := st.def
		if v, ok := os.LookupEnv(st.env); ok {
			def = v
		}
		help := st.help
		if st.env != "" {
			help += " (env " + st.env + ")"
		}
		s.vals[st.flag] = s.fs.String(st.flag, def, help)
	}
	return s
}

func (s *settings) get(name string) string { return *s.vals[name] }
