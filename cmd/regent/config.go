package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
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
		v := new(string)
		*v = def
		if hiddenSettings[st.flag] {
			// A secret: --help must not print what the environment holds.
			s.fs.Var(hiddenSetting{v}, st.flag, help)
		} else if st.def == "true" || st.def == "false" {
			// A switch: a bare --flag means true, as with any Go bool flag.
			s.fs.Var(boolSetting{v}, st.flag, help)
		} else {
			s.fs.StringVar(v, st.flag, def, help)
		}
		s.vals[st.flag] = v
	}
	return s
}

// given reports whether a setting was set by its flag or its environment
// variable, not left at its default.
func (s *settings) given(name string) bool {
	set := false
	s.fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	for _, st := range s.list {
		if st.flag == name && st.env != "" {
			if _, ok := os.LookupEnv(st.env); ok {
				set = true
			}
		}
	}
	return set
}

// hiddenSettings are the settings whose value --help does not show.
var hiddenSettings = map[string]bool{}

// hiddenSetting is a string setting whose value is not shown.
type hiddenSetting struct{ v *string }

func (h hiddenSetting) String() string     { return "" }
func (h hiddenSetting) Set(s string) error { *h.v = s; return nil }

// boolSetting is a boolean setting kept as its string ("true" or "false").
type boolSetting struct{ v *string }

func (b boolSetting) String() string {
	if b.v == nil {
		return ""
	}
	return *b.v
}

func (b boolSetting) Set(s string) error {
	ok, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false")
	}
	*b.v = strconv.FormatBool(ok)
	return nil
}

func (b boolSetting) IsBoolFlag() bool { return true }

func (s *settings) get(name string) string { return *s.vals[name] }
