package testserver_test

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testserver"
)

// TestKube starts a kube-apiserver over its etcd, lets the least-privileged
// user use Leases, and checks that the apiserver serves Leases again after
// a restart, on the same address. The adversary is a restart that would
// move the server or lose what etcd keeps (the Role survives it).
func TestKube(t *testing.T) {
	start := time.Now()
	k := testserver.StartKube(t)
	t.Logf("kube-apiserver ready at %s in %v", k.URL(), time.Since(start).Round(time.Millisecond))
	k.GrantLeases(t, "default")
	path := k.WriteKubeconfig(t, testserver.KubeUser, "", "default")
	cfg, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the kubeconfig: %v", err)
	}
	if !strings.Contains(string(cfg), k.URL()) || !strings.Contains(string(cfg), k.Token(testserver.KubeUser)) {
		t.Errorf("kubeconfig %s lacks the server or the user's token:\n%s", path, cfg)
	}
	url := k.URL()
	k.Restart(t)
	if k.URL() != url {
		t.Errorf("URL after Restart = %s, want %s", k.URL(), url)
	}
	roles := k.Admin(t, http.MethodGet, "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles/dlock-leases", "")
	if !strings.Contains(string(roles), "leases") {
		t.Errorf("the Role after a restart = %s, want its rule on leases", roles)
	}
}
