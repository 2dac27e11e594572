package httpapi

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// refValidJSON is validJSON as it was: jsonReader's recursive skip, the
// reader the push path still checks payloads with.
func refValidJSON(b []byte) bool {
	r := jsonReader{b: b}
	r.skip()
	r.end()
	return r.err == nil
}

func checkValidJSON(t *testing.T, b []byte) {
	t.Helper()
	if got, want := validJSON(b), refValidJSON(b); got != want {
		t.Fatalf("validJSON(%.300q) = %v, jsonReader says %v", b, got, want)
	}
}

// Nesting at and around the limit, with every kind of innermost value.
func TestValidJSONDepth(t *testing.T) {
	for _, n := range []int{maxDepth - 1, maxDepth, maxDepth + 1, maxDepth + 2, maxDepth + 3} {
		for _, inner := range []string{"", "1", `"s"`, "[]", "{}", `{"k":1}`, "[1,2]", "null"} {
			for _, open := range []string{"[", `{"a":`, "mixed"} {
				var pre, post strings.Builder
				for k := 0; k < n; k++ {
					o := open
					if o == "mixed" {
						o = []string{"[", `{"a":`}[k%2]
					}
					pre.WriteString(o)
					if o == "[" {
						post.WriteString("]")
					} else {
						post.WriteString("}")
					}
				}
				p := post.String()
				rev := []byte(p)
				for a, z := 0, len(rev)-1; a < z; a, z = a+1, z-1 {
					rev[a], rev[z] = rev[z], rev[a]
				}
				checkValidJSON(t, []byte(pre.String()+inner+string(rev)))
				checkValidJSON(t, []byte(" "+pre.String()+" "+inner+" "+string(rev)+" \n"))
			}
		}
	}
}

// Documents, then every one of them cut short at each length and with
// bytes changed at random.
func TestValidJSONIsJSONReaders(t *testing.T) {
	docs := append([]string{}, jsonSamples...)
	docs = append(docs,
		`{"a":[1,-2.5e+3,true,false,null,"x\u00e9\n"],"b":{"c":{},"d":[]}, "e" : [ { } , [ ] ] }`,
		` [ 0 , -0 , 0.0 , 1E5 , 1e-5 , "\ud83d\ude00" , "\/" ] `,
		`{"":""}`, `[[],[[]],{"a":{"b":[{}]}}]`, `{"a":1,"a":2}`, "[1,\n2,\t3,\r4]",
		`{"id":7,"kind":"order.created","customer":"c-000007","amount":1234.5,"note":"xxxxxxxxxxxxxxxxx"}`,
		`{"a" 1}`, `{"a":1,}`, `[,1]`, `{,}`, `{"a":1}}`, `[1]]`, `{"a":[}`, `["a":1]`, `{1:2}`, `[01]`, `[1.e5]`, `[-]`, `[--1]`,
		`["\u12g4"]`, `["\u"]`, "[\"\x1f\"]", `[tru]`, `[nulll]`, `[true false]`, `{"a":1 "b":2}`, "\xef\xbb\xbf{}", "{}\x00",
	)
	r := rand.New(rand.NewPCG(13, 14))
	junk := []byte(" \t\n\r{}[]:,\"\\-+.0123456789eEtrufalsn\x00\x1f\xff/bu")
	for _, d := range docs {
		b := []byte(d)
		checkValidJSON(t, b)
		for n := 0; n <= len(b); n++ {
			checkValidJSON(t, b[:n])
		}
		for k := 0; k < 300 && len(b) > 0; k++ {
			m := []byte(d)
			for c := 0; c <= k%3; c++ {
				switch p := r.IntN(len(m)); r.IntN(3) {
				case 0:
					m[p] = junk[r.IntN(len(junk))]
				case 1:
					m = append(m[:p], m[p+1:]...)
				default:
					m = append(m[:p], append([]byte{junk[r.IntN(len(junk))]}, m[p:]...)...)
				}
				if len(m) == 0 {
					break
				}
			}
			checkValidJSON(t, m)
		}
	}
	checkValidJSON(t, []byte(`{"big":"`+strings.Repeat("x", 1<<20)+`"}`))
	checkValidJSON(t, []byte(`[`+strings.Repeat(`1,`, 1<<18)+`1]`))
}

// FuzzValidJSON holds validJSON to jsonReader's skip on any input.
func FuzzValidJSON(f *testing.F) {
	for _, s := range jsonSamples {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"a":[1,{"b":[]}],"c":"\u00e9"}`))
	f.Add([]byte(strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)))
	f.Fuzz(checkValidJSON)
}
