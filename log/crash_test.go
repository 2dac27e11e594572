package log

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const crashEnv = "REGENT_LOG_CRASH_CHILD_DIR"

// TestCrashChild is the child half of TestUncleanStop: it only runs when the
// parent starts this test binary with crashEnv set. It appends from several
// goroutines with SyncAlways and prints "ack W-I" once done(nil) returned for
// record I of writer W, until it is killed (or gives up after 30s).
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("child process of TestUncleanStop")
	}
	l, err := Open(Config{Dir: dir, Sync: SyncAlways, SegmentBytes: 256 << 10})
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(2)
	}
	acks := make(chan string, 1<<16)
	fmt.Printf("ready %d\n", os.Getpid())
	for w := 0; w < 4; w++ {
		go func() {
			inflight := make(chan struct{}, 32)
			for i := 0; ; i++ {
				inflight <- struct{}{}
				rec := fmt.Appendf(nil, "%d-%d|%s", w, i, strings.Repeat("payload ", i%40))
				_, err := l.Append(rec, func(err error) {
					if err == nil {
						acks <- fmt.Sprintf("ack %d-%d", w, i)
					}
					<-inflight
				})
				if err != nil {
					fmt.Printf("error %v\n", err)
					os.Exit(2)
				}
			}
		}()
	}
	out := bufio.NewWriter(os.Stdout)
	deadline := time.After(30 * time.Second)
	for {
		select {
		case a := <-acks:
			out.WriteString(a + "\n")
			if len(acks) == 0 {
				out.Flush()
			}
		case <-deadline:
			out.Flush()
			os.Exit(3)
		}
	}
}

// TestUncleanStop runs a child process that appends with SyncAlways and is
// killed with SIGKILL mid-stream (no Close, the kernel drops its lock): every
// record whose done returned nil before the kill must be there after reopen,
// each writer's records form a gap-free prefix, and nothing else appears.
func TestUncleanStop(t *testing.T) {
	if os.Getenv(crashEnv) != "" {
		t.Skip("in the child")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	acked := map[string]bool{}
	var mu sync.Mutex
	readyPid := make(chan int, 1)
	enough := make(chan struct{})
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "ready "):
				pid, _ := strconv.Atoi(strings.TrimPrefix(line, "ready "))
				readyPid <- pid
			case strings.HasPrefix(line, "ack "):
				mu.Lock()
				acked[strings.TrimPrefix(line, "ack ")] = true
				if len(acked) == 3000 {
					close(enough)
				}
				mu.Unlock()
			default:
				t.Logf("child: %s", line) // test framework chatter
			}
		}
	}()

	var pid int
	select {
	case pid = <-readyPid:
	case <-time.After(20 * time.Second):
		t.Fatal("child did not open the log")
	}
	// While the child holds the directory, Open fails and names it.
	if _, _, err := tryOpen(dir); !isErr(err, ErrLocked) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(pid)) {
		t.Fatalf("Open while the child holds the lock: %v", err)
	}
	select {
	case <-enough:
	case <-time.After(25 * time.Second):
		t.Fatal("child did not ack 3000 records")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-readDone // acks printed before the kill are still in the pipe
	cmd.Wait()

	l, _ := openT(t, dir)
	next := map[int]int{}
	err = l.Replay(0, func(pos uint64, rec []byte) error {
		head, _, ok := strings.Cut(string(rec), "|")
		var w, i int
		if _, err := fmt.Sscanf(head, "%d-%d", &w, &i); !ok || err != nil {
			return fmt.Errorf("phantom record %q at %d", rec, pos)
		}
		if i != next[w] {
			return fmt.Errorf("writer %d: record %d where %d was expected", w, i, next[w])
		}
		if want := strings.Repeat("payload ", i%40); !strings.HasSuffix(string(rec), "|"+want) {
			return fmt.Errorf("record %s has a wrong payload", head)
		}
		next[w]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	missing := 0
	for a := range acked {
		var w, i int
		fmt.Sscanf(a, "%d-%d", &w, &i)
		if i >= next[w] {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged records are missing after the crash", missing, len(acked))
	}
	total := 0
	for _, n := range next {
		total += n
	}
	t.Logf("%d acknowledged, %d recovered (the rest were written but not yet acknowledged)", len(acked), total)
}
