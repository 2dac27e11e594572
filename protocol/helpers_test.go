package protocol

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
)

// allBodies returns one new value of every request and reply type.
func allBodies() []Body {
	var out []Body
	for _, op := range Ops() {
		out = append(out, NewRequest(op), NewReply(op))
	}
	return out
}

// bodyName names a body type: "PushRequest".
func bodyName(b Body) string { return reflect.TypeOf(b).Elem().Name() }

// newLike returns a new zero value of b's type.
func newLike(b Body) Body { return reflect.New(reflect.TypeOf(b).Elem()).Interface().(Body) }

// filler sets every exported field of a value: to the largest values the
// wire allows (max), or to random ones.
type filler struct {
	max bool
	rnd *rand.Rand
	n   int // elements per slice
	str int // bytes per string
}

func (f *filler) fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				f.fill(v.Field(i))
			}
		}
	case reflect.Array: // UUID
		for i := 0; i < v.Len(); i++ {
			if f.max {
				v.Index(i).SetUint(0xff)
			} else {
				v.Index(i).SetUint(uint64(f.rnd.IntN(256)))
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 { // payload
			b := make([]byte, f.str*4)
			for i := range b {
				b[i] = byte(i*7 + f.str)
			}
			v.SetBytes(b)
			return
		}
		n := f.n
		if !f.max {
			n = f.rnd.IntN(f.n + 1)
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := 0; i < n; i++ {
			f.fill(s.Index(i))
		}
		v.Set(s)
	case reflect.String:
		n := f.str
		if !f.max {
			n = f.rnd.IntN(f.str + 1)
		}
		v.SetString(strings.Repeat("é", n/2) + strings.Repeat("x", n%2))
	case reflect.Bool:
		v.SetBool(f.max || f.rnd.IntN(2) == 1)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if v.Type() == reflect.TypeFor[OptionMask]() {
			if f.max {
				v.SetUint(uint64(OptAll))
			} else {
				v.SetUint(f.rnd.Uint64() & uint64(OptAll))
			}
			return
		}
		bits := v.Type().Bits()
		if f.max {
			v.SetUint(math.MaxUint64 >> (64 - bits))
		} else {
			v.SetUint(f.rnd.Uint64() >> (64 - f.rnd.IntN(bits) - 1))
		}
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := v.Type().Bits()
		if f.max {
			v.SetInt(math.MinInt64 >> (64 - bits))
		} else {
			v.SetInt(int64(f.rnd.Uint64()) >> (64 - f.rnd.IntN(bits) - 1))
		}
	default:
		panic("filler: unhandled kind " + v.Kind().String())
	}
}

// sample is one value of a body type.
type sample struct {
	name string
	body Body
}

// samples returns, for every body type, its zero value, a maximal value
// (every number at its widest, strings of 300 bytes, 3 elements per list)
// and a few random ones.
func samples() []sample {
	var out []sample
	for _, b := range allBodies() {
		name := bodyName(b)
		out = append(out, sample{name + "/empty", b})
		m := newLike(b)
		(&filler{max: true, n: 3, str: 300}).fill(reflect.ValueOf(m).Elem())
		out = append(out, sample{name + "/max", m})
		for seed := uint64(1); seed <= 3; seed++ {
			r := newLike(b)
			(&filler{rnd: rand.New(rand.NewPCG(seed, 7)), n: 4, str: 20}).fill(reflect.ValueOf(r).Elem())
			out = append(out, sample{fmt.Sprintf("%s/random%d", name, seed), r})
		}
	}
	return out
}

// equal compares two values by their exported fields, treating nil and
// empty slices alike. It returns "" or the path of the first difference.
func equal(a, b any) string { return diff(reflect.ValueOf(a), reflect.ValueOf(b), "") }

func diff(a, b reflect.Value, path string) string {
	switch a.Kind() {
	case reflect.Pointer:
		return diff(a.Elem(), b.Elem(), path)
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			if !a.Type().Field(i).IsExported() {
				continue
			}
			if d := diff(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); d != "" {
				return d
			}
		}
		return ""
	case reflect.Slice, reflect.Array:
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s: len %d != %d", path, a.Len(), b.Len())
		}
		for i := 0; i < a.Len(); i++ {
			if d := diff(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
		return ""
	}
	if !a.Equal(b) {
		return fmt.Sprintf("%s: %v != %v", path, a, b)
	}
	return ""
}

// frameOf encodes b as a whole frame with id 42.
func frameOf(b Body) []byte { return AppendFrame(nil, 42, b) }

// bodyOf encodes b's body alone.
func bodyOf(b Body) []byte { return b.AppendBody(nil) }
