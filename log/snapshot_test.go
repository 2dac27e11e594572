package log

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestSecondOpenIsLocked(t *testing.T) {
	dir := t.TempDir()
	l, _ := openT(t, dir)
	_, _, err := tryOpen(dir)
	if !isErr(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	for _, s := range []string{"in use", "pid " + strconv.Itoa(os.Getpid())} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, _, err := tryOpen(dir)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	l2.Close()
}

func snapFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, snapDirName, "*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSnapshots(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	big := payload(r, 1<<20, true)
	random := payload(r, 4096, false)
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"tiny", []byte("state")},
		{"compressible-1MiB", big},
		{"random", random},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l, _ := openT(t, dir)
			if _, _, ok, err := l.LoadSnapshot(); ok || err != nil {
				t.Fatalf("no snapshot yet: ok=%v err=%v", ok, err)
			}
			for i := 0; i < 3; i++ { // the entries the snapshot covers (Open drops one ahead of the WAL)
				appendWait(t, l, []byte("r"))
			}
			if err := l.WriteSnapshot(MakePos(3, 1), tc.data); err != nil {
				t.Fatal(err)
			}
			l.Close()
			l2, _ := openT(t, dir)
			pos, data, ok, err := l2.LoadSnapshot()
			if err != nil || !ok || pos != MakePos(3, 1) || !bytes.Equal(data, tc.data) {
				t.Fatalf("LoadSnapshot = %d, %d bytes, %v, %v", pos, len(data), ok, err)
			}
		})
	}
}

func TestSnapshotNewestWinsAndPrune(t *testing.T) {
	dir := t.TempDir()
	l, sink := openT(t, dir)
	for i := uint64(1); i <= 4; i++ {
		if err := l.WriteSnapshot(MakePos(i*10, 0), []byte("state "+strconv.Itoa(int(i)))); err != nil {
			t.Fatal(err)
		}
	}
	if files := snapFiles(t, dir); len(files) != 2 {
		t.Fatalf("kept %v, want the newest 2", files)
	}
	pos, data, ok, err := l.LoadSnapshot()
	if err != nil || !ok || pos != MakePos(40, 0) || string(data) != "state 4" {
		t.Fatalf("newest: %d %q %v %v", pos, data, ok, err)
	}

	// Corrupt the newest: the older one is used, with a warning naming why.
	newest := filepath.Join(dir, snapDirName, snapName(MakePos(40, 0)))
	b, _ := os.ReadFile(newest)
	b[len(b)-1] ^= 1
	os.WriteFile(newest, b, 0o640)
	pos, data, ok, err = l.LoadSnapshot()
	if err != nil || !ok || pos != MakePos(30, 0) || string(data) != "state 3" {
		t.Fatalf("fallback: %d %q %v %v", pos, data, ok, err)
	}
	if _, ok := sink.find("WARN", "snapshot unusable", snapName(MakePos(40, 0)), "checksum"); !ok {
		t.Fatalf("fallback not logged:\n%s", sink.all())
	}

	// Both bad: an error wrapping ErrCorrupt, not a silent "no snapshot".
	older := filepath.Join(dir, snapDirName, snapName(MakePos(30, 0)))
	os.WriteFile(older, []byte("RGNS garbage"), 0o640)
	if _, _, ok, err := l.LoadSnapshot(); ok || !isErr(err, ErrCorrupt) {
		t.Fatalf("all corrupt: ok=%v err=%v", ok, err)
	}

	// A leftover temporary file from a crash is removed at Open.
	l.Close()
	tmp := filepath.Join(dir, snapDirName, snapName(99)+snapTmpSuffix)
	os.WriteFile(tmp, []byte("half"), 0o640)
	openT(t, dir)
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("temporary snapshot survived Open: %v", err)
	}
}

func TestDecodeSnapshotErrors(t *testing.T) {
	good := encodeSnapshot(7, bytes.Repeat([]byte("abc"), 100))
	if p, d, err := decodeSnapshot(good); err != nil || p != 7 || len(d) != 300 {
		t.Fatalf("good: %d %d %v", p, len(d), err)
	}
	for i := 0; i < len(good); i++ {
		b := bytes.Clone(good)
		b[i] ^= 0x20
		if _, _, err := decodeSnapshot(b); !isErr(err, ErrCorrupt) {
			t.Fatalf("flip at %d: %v", i, err)
		}
	}
	for n := 0; n < len(good); n += 7 {
		if _, _, err := decodeSnapshot(good[:n]); !isErr(err, ErrCorrupt) {
			t.Fatalf("cut at %d: %v", n, err)
		}
	}
}
