package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEnvCommitIgnoresDocumentation: a result file or a note written
// between runs does not mark the code as modified; a source change does.
func TestEnvCommitIgnoresDocumentation(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q")
	write("main.go", "package main\n")
	write("BENCHMARKS.md", "# b\n")
	write("docs/bench/results/01.json", "{}\n")
	write("sub/notes.md", "n\n")
	git("add", ".")
	git("commit", "-q", "-m", "c")
	t.Chdir(dir)

	write("BENCHMARKS.md", "# changed\n")
	write("docs/bench/results/01.json", "{\"x\":1}\n")
	write("sub/notes.md", "changed\n")
	if c := CurrentEnv().Commit; c == "" || strings.HasSuffix(c, "+modified") {
		t.Fatalf("documentation changes only: commit %q", c)
	}
	write("main.go", "package main\n\nfunc main() {}\n")
	if c := CurrentEnv().Commit; !strings.HasSuffix(c, "+modified") {
		t.Fatalf("a source change: commit %q", c)
	}
}
