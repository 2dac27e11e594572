package dashboard_test

import (
	"fmt"
	"os"
	"testing"
)

// TestMain: every test of this package drives a browser. Without Chromium
// they cannot run, and a skip inside a passing package is invisible in
// `go test ./...` (the go command prints a passing package's output only
// with -v), so TestMain says so itself: it prints why, and the testing
// package's own "no tests to run" warning, which the go command shows as
// "[no tests to run]" on the package's ok line. With
// REGENT_REQUIRE_CHROMIUM=1 (CI sets it) a missing Chromium fails the
// package instead.
func TestMain(m *testing.M) {
	if chromiumPath() == "" {
		if os.Getenv("REGENT_REQUIRE_CHROMIUM") == "1" {
			fmt.Println("dashboard browser tests FAILED: no Chromium found, and REGENT_REQUIRE_CHROMIUM=1 requires it " +
				"(install Debian's chromium package, or set REGENT_CHROMIUM to the browser's binary)")
			fmt.Println("FAIL")
			os.Exit(1)
		}
		fmt.Println("dashboard browser tests SKIPPED: no Chromium found (install Debian's chromium package, " +
			"or set REGENT_CHROMIUM to the browser's binary; REGENT_REQUIRE_CHROMIUM=1 makes this a failure)")
		fmt.Print("\ntesting: warning: no tests to run\n")
		os.Exit(0)
	}
	os.Exit(m.Run())
}
