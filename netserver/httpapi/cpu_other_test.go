//go:build !unix

package httpapi_test

import "time"

// processCPU is 0 where getrusage is missing: no cpu-µs/msg figure.
func processCPU() time.Duration { return 0 }
