package headerjson

import (
	"bytes"
	"encoding/json"
	"maps"
	"testing"
)

// The inputs both tests and the fuzzers start from: what PostgreSQL's
// jsonb, MySQL's JSON and encoding/json write, and what each of them
// would refuse or read otherwise.
var unmarshalSeeds = []string{
	`{}`, ` { } `, `{"h":"v"}`, `{"h": "v"}`, `{"a": "1", "b": "2"}`,
	`{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "congo=t61rcWkgMzE"}`,
	"{\n\t\"a\" :\r\"b\" }\n", `{"a":"b","a":"c"}`, `{"ключ": "значение"}`, `{"a": "x` + "\x7f" + `"}`,
	`{"a": "\u00e9"}`, `{"a": "b\"c"}`, `{"a\\n": "b"}`, `{"a": "` + "\x01" + `"}`, "{\"a\": \"\xff\"}",
	`null`, ` null `, `{"a": 1}`, `{"a": null}`, `{"a": "b",}`, `{"a" "b"}`, `{"a": "b"} x`, `{"a": "b"`,
	`{"a": "b"}}`, `[]`, `"a"`, ``, `{`, `{"a`, `{"a":`, `{,}`, `{"a": "b" "c": "d"}`,
}

// TestUnmarshalAsEncodingJSON holds Unmarshal to json.Unmarshal's result
// on the seeds, into a nil map and into one that has a member already.
func TestUnmarshalAsEncodingJSON(t *testing.T) {
	for _, in := range unmarshalSeeds {
		sameAsEncodingJSON(t, []byte(in))
	}
}

func FuzzUnmarshal(f *testing.F) {
	for _, in := range unmarshalSeeds {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, b []byte) { sameAsEncodingJSON(t, b) })
}

func sameAsEncodingJSON(t *testing.T, b []byte) {
	t.Helper()
	for _, start := range []map[string]string{nil, {"old": "x"}} {
		got, want := maps.Clone(start), maps.Clone(start)
		gotErr, wantErr := Unmarshal(b, &got), json.Unmarshal(b, &want)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("Unmarshal(%q) error %v, json.Unmarshal's %v", b, gotErr, wantErr)
		}
		if wantErr != nil {
			continue
		}
		if (got == nil) != (want == nil) || !maps.Equal(got, want) {
			t.Fatalf("Unmarshal(%q) into %v = %#v, json.Unmarshal gives %#v", b, start, got, want)
		}
	}
}

// The plain paths are taken where they should be: a test of the fast
// path, not only of the result.
func TestUnmarshalPlainTakesTheUsualHeaders(t *testing.T) {
	for _, in := range []string{`{}`, `{"h": "v"}`, `{"a":"1","b":"2"}`, `{"ключ": "значение"}`} {
		var h map[string]string
		if !unmarshalPlain([]byte(in), &h) {
			t.Errorf("%s: handed to encoding/json", in)
		}
	}
	for _, in := range []string{`null`, `{"a": "\u00e9"}`, "{\"a\": \"\xff\"}", `{"a": 1}`} {
		var h map[string]string
		if unmarshalPlain([]byte(in), &h) || h != nil {
			t.Errorf("%s: read without encoding/json (%v)", in, h)
		}
	}
}

var marshalSeeds = []map[string]string{
	nil, {}, {"h": "v"}, {"b": "2", "a": "1", "c": ""}, {"": ""},
	{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "congo=t61rcWkgMzE"},
	{"a": "<b>&"}, {"a": `q"uote`}, {"a": `back\slash`}, {"a": "line\nbreak"}, {"é": "ü"}, {"a": "\u2028"},
	{"a": "\xff"}, {"a": "\x7f"},
}

func TestMarshalAsEncodingJSON(t *testing.T) {
	for _, h := range marshalSeeds {
		sameBytesAsEncodingJSON(t, h)
	}
}

func FuzzMarshal(f *testing.F) {
	f.Add("a", "b", "c", "d")
	f.Add("<", "&", `"`, "\\")
	f.Add("é", "\x00", "\xff", "z")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		sameBytesAsEncodingJSON(t, map[string]string{k1: v1, k2: v2})
	})
}

func sameBytesAsEncodingJSON(t *testing.T, h map[string]string) {
	t.Helper()
	got, err := Marshal(h)
	want, wantErr := json.Marshal(h)
	if err != nil || wantErr != nil {
		t.Fatalf("Marshal(%#v): %v; json.Marshal: %v", h, err, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Marshal(%#v) = %s, json.Marshal gives %s", h, got, want)
	}
}

var traced = []byte(`{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "congo=t61rcWkgMzE"}`)

func BenchmarkUnmarshal(b *testing.B) {
	for _, c := range []struct {
		name string
		f    func([]byte, *map[string]string) error
	}{{"headerjson", Unmarshal}, {"encoding-json", func(b []byte, h *map[string]string) error { return json.Unmarshal(b, h) }}} {
		for _, in := range []struct{ name, in string }{{"one", `{"h": "v"}`}, {"traced", string(traced)}} {
			b.Run(c.name+"/"+in.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					var h map[string]string
					if err := c.f([]byte(in.in), &h); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkMarshal(b *testing.B) {
	h := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "congo=t61rcWkgMzE"}
	for _, c := range []struct {
		name string
		f    func(map[string]string) ([]byte, error)
	}{{"headerjson", Marshal}, {"encoding-json", func(h map[string]string) ([]byte, error) { return json.Marshal(h) }}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.f(h); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestColumn(t *testing.T) {
	for _, c := range []struct {
		src  any
		want map[string]string
		err  bool
	}{{nil, nil, false}, {[]byte(`{"a": "b"}`), map[string]string{"a": "b"}, false}, {`{"a": "b"}`, map[string]string{"a": "b"}, false},
		{[]byte(`null`), nil, false}, {[]byte(`{"a": 1}`), nil, true}, {42, nil, true}} {
		var h map[string]string
		err := Column(&h).Scan(c.src)
		if (err != nil) != c.err || !c.err && (!maps.Equal(h, c.want) || (h == nil) != (c.want == nil)) {
			t.Errorf("Scan(%#v) = %v, %v; want %v (error %v)", c.src, h, err, c.want, c.err)
		}
	}
	var h map[string]string
	if err := Column(&h).ScanBytes(nil); err != nil || h != nil {
		t.Errorf("ScanBytes(nil) = %v, %v; want a nil map", h, err)
	}
}
