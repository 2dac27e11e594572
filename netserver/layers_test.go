package netserver_test

import (
	"os/exec"
	"strings"
	"testing"
)

// deps is what `go list -deps` says pkg imports, directly or not: each
// package with its own direct imports.
func deps(t *testing.T, pkg string) map[string][]string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the imports with")
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	graph := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		graph[f[0]] = f[1:]
	}
	return graph
}

// The doors know nothing of each other, and what they share pulls in
// neither door's machinery (DESIGN.md, "The house"). gnet itself imports
// net/http (through its logger, go.uber.org/zap), so for the binary door
// the rule is that nothing but gnet brings net/http in.
func TestDoorsKnowNothingOfEachOther(t *testing.T) {
	const (
		mod     = "github.com/regentmq/regent/"
		gnet    = "github.com/panjf2000/gnet/v2"
		tcp     = mod + "netserver/tcp"
		httpapi = mod + "netserver/httpapi"
	)
	refuse := func(pkg string, got map[string][]string, banned ...string) {
		t.Helper()
		for _, b := range banned {
			if _, ok := got[b]; ok {
				t.Errorf("%s imports %s", pkg, b)
			}
		}
	}
	refuse("netserver", deps(t, mod+"netserver"), "net/http", gnet, tcp, httpapi)
	refuse("netserver/httpapi", deps(t, httpapi), gnet, tcp)
	tcpDeps := deps(t, tcp)
	refuse("netserver/tcp", tcpDeps, httpapi, httpapi+"/dashboard")
	gnetDeps := deps(t, gnet)
	for p, imports := range tcpDeps {
		if _, viaGnet := gnetDeps[p]; viaGnet {
			continue
		}
		for _, imp := range imports {
			if imp == "net/http" {
				t.Errorf("netserver/tcp imports net/http through %s, not through gnet", p)
			}
		}
	}
}
