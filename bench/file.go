package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// File is a result file: what one command measured, with where and how.
type File struct {
	// Kind is "run" (one run), "compare" (rounds of sides) or "sweep" (one
	// parameter varied).
	Kind    string   `json:"kind"`
	Command string   `json:"command"` // the command line, as typed
	Env     Env      `json:"env"`
	Results []Result `json:"results"`
}

// Env is the machine and code a result file was measured on.
type Env struct {
	Date      time.Time `json:"date"`
	CPU       string    `json:"cpu"`
	Cores     int       `json:"cores"`
	MemoryB   int64     `json:"memory_bytes"`
	Kernel    string    `json:"kernel"`
	OS        string    `json:"os"`
	GoVersion string    `json:"go_version"`
	Commit    string    `json:"commit"` // "" when unknown; "+modified" when the tree had changes outside the documentation
}

// CurrentEnv describes this machine and the code in the current directory.
func CurrentEnv() Env {
	e := Env{Date: time.Now().UTC(), Cores: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH, GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				e.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		e.MemoryB, _ = parseStatusKB(b, "MemTotal:")
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		e.Kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		e.Commit = strings.TrimSpace(string(out))
		// Documentation (the result files themselves among it) does not
		// change what is measured.
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no", "--",
			":(top)", ":(top,exclude)docs", ":(top,exclude,glob)**/*.md").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
			e.Commit += "+modified"
		}
	}
	return e
}

// CommandLine renders args as a shell command (quoting what needs it).
func CommandLine(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"$`\\*?[]()<>|;&!{}") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}

// WriteFile writes f as indented JSON.
func WriteFile(path string, f *File) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadFiles reads every *.json result file of dir, in name order.
func ReadFiles(dir string) ([]File, []string, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, nil, err
	}
	sort.Strings(names)
	var out []File
	var bases []string
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, nil, err
		}
		var f File
		if err := json.Unmarshal(b, &f); err != nil {
			return nil, nil, fmt.Errorf("bench: %s: %w", n, err)
		}
		out = append(out, f)
		bases = append(bases, strings.TrimSuffix(filepath.Base(n), ".json"))
	}
	return out, bases, nil
}

// ParseInts reads a comma-separated list of integers ("1,10,100"; "1e5" and
// "100_000" are accepted).
func ParseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.ReplaceAll(strings.TrimSpace(f), "_", "")
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			x, ferr := strconv.ParseFloat(f, 64)
			if ferr != nil || x != float64(int(x)) {
				return nil, fmt.Errorf("%w: %q is not an integer", ErrConfig, f)
			}
			n = int(x)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: empty list", ErrConfig)
	}
	return out, nil
}
