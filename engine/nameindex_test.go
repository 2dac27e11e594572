package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestNameIndexAgainstAMap puts and deletes names at random and checks every
// lookup against a map.
func TestNameIndexAgainstAMap(t *testing.T) {
	var x nameIndex
	want := map[string]*partition{}
	rnd := rand.New(rand.NewPCG(1, 2))
	for step := 0; step < 20000; step++ {
		name := fmt.Sprint("p", rnd.IntN(500))
		if want[name] == nil {
			p := &partition{name: name}
			x.put(p)
			want[name] = p
		} else if rnd.IntN(2) == 0 {
			x.del(name)
			delete(want, name)
		}
		if step%97 == 0 {
			for i := 0; i < 500; i++ {
				n := fmt.Sprint("p", i)
				if got := x.get(n); got != want[n] {
					t.Fatalf("step %d: get(%s) = %v, want %v", step, n, got, want[n])
				}
			}
			if x.len() != len(want) {
				t.Fatalf("len %d, want %d", x.len(), len(want))
			}
		}
	}
}
