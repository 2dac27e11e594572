package benchtest_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/regentmq/regent/bench"
)

// TestMain: every test of this package drives a redis-server (the harness's
// Redis peer). Without one they cannot run, and a skip inside a passing
// package is invisible in `go test ./...` (the go command prints a passing
// package's output only with -v), so TestMain says so itself: it prints
// why, and the testing package's own "no tests to run" warning, which the
// go command shows as "[no tests to run]" on the package's ok line. With
// REGENT_REQUIRE_REDIS=1 (CI sets it) a missing redis-server fails the
// package instead.
func TestMain(m *testing.M) {
	if _, err := bench.FindRedis(""); err != nil {
		if os.Getenv("REGENT_REQUIRE_REDIS") == "1" {
			fmt.Println("bench Redis peer tests FAILED: no redis-server on PATH, and REGENT_REQUIRE_REDIS=1 requires it " +
				"(install Debian's redis-server package)")
			fmt.Println("FAIL")
			os.Exit(1)
		}
		fmt.Println("bench Redis peer tests SKIPPED: no redis-server on PATH (install Debian's redis-server package; " +
			"REGENT_REQUIRE_REDIS=1 makes this a failure)")
		fmt.Print("\ntesting: warning: no tests to run\n")
		os.Exit(0)
	}
	os.Exit(m.Run())
}
