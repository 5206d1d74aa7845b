package testserver

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// KubeVersion is the Kubernetes release the tests run: kube-apiserver's
// module version and its staging modules' (v0.X.Y for v1.X.Y).
const KubeVersion = "v1.37.2"

// KubeAPIServer is kube-apiserver, built from k8s.io/kubernetes through the
// module proxy. That module's go.mod replaces each of its staging modules
// with ./staging/src/k8s.io/X, which a module requiring it cannot follow;
// Replace points each one at the staging module's own release instead (the
// list is k8s.io/kubernetes v1.37.2's go.mod, generated, not guessed). The
// -X flags stamp the version that clients such as kubectl check.
var KubeAPIServer = GoServer{
	Name:    "kube-apiserver",
	Package: "k8s.io/kubernetes/cmd/kube-apiserver",
	Version: KubeVersion,
	Replace: []string{
		"k8s.io/api => k8s.io/api v0.37.2",
		"k8s.io/apiextensions-apiserver => k8s.io/apiextensions-apiserver v0.37.2",
		"k8s.io/apimachinery => k8s.io/apimachinery v0.37.2",
		"k8s.io/apiserver => k8s.io/apiserver v0.37.2",
		"k8s.io/cli-runtime => k8s.io/cli-runtime v0.37.2",
		"k8s.io/client-go => k8s.io/client-go v0.37.2",
		"k8s.io/cloud-provider => k8s.io/cloud-provider v0.37.2",
		"k8s.io/cluster-bootstrap => k8s.io/cluster-bootstrap v0.37.2",
		"k8s.io/code-generator => k8s.io/code-generator v0.37.2",
		"k8s.io/component-base => k8s.io/component-base v0.37.2",
		"k8s.io/component-helpers => k8s.io/component-helpers v0.37.2",
		"k8s.io/controller-manager => k8s.io/controller-manager v0.37.2",
		"k8s.io/cri-api => k8s.io/cri-api v0.37.2",
		"k8s.io/cri-client => k8s.io/cri-client v0.37.2",
		"k8s.io/cri-streaming => k8s.io/cri-streaming v0.37.2",
		"k8s.io/csi-translation-lib => k8s.io/csi-translation-lib v0.37.2",
		"k8s.io/dynamic-resource-allocation => k8s.io/dynamic-resource-allocation v0.37.2",
		"k8s.io/endpointslice => k8s.io/endpointslice v0.37.2",
		"k8s.io/externaljwt => k8s.io/externaljwt v0.37.2",
		"k8s.io/kms => k8s.io/kms v0.37.2",
		"k8s.io/kube-aggregator => k8s.io/kube-aggregator v0.37.2",
		"k8s.io/kube-controller-manager => k8s.io/kube-controller-manager v0.37.2",
		"k8s.io/kube-proxy => k8s.io/kube-proxy v0.37.2",
		"k8s.io/kube-scheduler => k8s.io/kube-scheduler v0.37.2",
		"k8s.io/kubectl => k8s.io/kubectl v0.37.2",
		"k8s.io/kubelet => k8s.io/kubelet v0.37.2",
		"k8s.io/metrics => k8s.io/metrics v0.37.2",
		"k8s.io/mount-utils => k8s.io/mount-utils v0.37.2",
		"k8s.io/pod-security-admission => k8s.io/pod-security-admission v0.37.2",
		"k8s.io/sample-apiserver => k8s.io/sample-apiserver v0.37.2",
		"k8s.io/sample-cli-plugin => k8s.io/sample-cli-plugin v0.37.2",
		"k8s.io/sample-controller => k8s.io/sample-controller v0.37.2",
		"k8s.io/streaming => k8s.io/streaming v0.37.2",
	},
	LDFlags: "-s -w -X k8s.io/component-base/version.gitVersion=v1.37.2" +
		" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37",
}

// Kube is a kube-apiserver started by StartKube over an etcd of its own.
// Its methods are safe for concurrent use. Kill, Pause, Resume and
// Restart act on the apiserver; Etcd is its store, for faults there.
type Kube struct {
	Etcd *Etcd // the apiserver's store

	bin    string
	dir    string // holds the certificates, the token file and server.log
	port   int    // the secure port, kept across restarts
	pki    *PKI
	sa     string // the service-account signing key
	saCert string // its certificate: the verifying key (PKCS#8 EC keys are not read as public keys)

	server
}

// Token names of the users StartKube's apiserver knows. KubeAdmin is in
// the group system:masters (everything); KubeUser is in no group, so it
// may do only what a test grants it (see GrantLeases).
const (
	KubeAdmin = "admin"
	KubeUser  = "locker"
)

// kubeTokens maps the users of the token file to their bearer tokens.
var kubeTokens = map[string]string{KubeAdmin: "dlock-admin-token", KubeUser: "dlock-locker-token"}

// StartKube starts an etcd (StartEtcd) and a kube-apiserver
// (KubeAPIServer, built or taken from the cache) over it, both on free
// loopback ports, and returns once the apiserver's /readyz answers ok.
// The apiserver serves HTTPS with a certificate of a PKI made for the
// test, authenticates users by bearer token (KubeAdmin, KubeUser) and
// authorizes by RBAC. When the test ends it kills the apiserver, then
// etcd (the apiserver can hang if etcd goes first or at once).
func StartKube(t testing.TB) *Kube {
	t.Helper()
	bin := KubeAPIServer.Build(t)
	k := &Kube{Etcd: StartEtcd(t), bin: bin, dir: t.TempDir(), pki: NewPKI(t)}
	k.writeTokens(t)
	k.saCert, k.sa = k.pki.Issue(t, "service-account", "service-account")
	k.server = server{name: "kube-apiserver", where: k.addr, start: k.startLocked}
	k.mu.Lock()
	k.startLocked(t)
	k.mu.Unlock()
	t.Cleanup(func() { // registered after etcd's: runs before it
		k.mu.Lock()
		defer k.mu.Unlock()
		if err := k.proc.kill(); err != nil {
			t.Errorf("stop kube-apiserver on %s: %v", k.addr(), err)
		}
	})
	return k
}

// writeTokens writes the token file and the service-account key.
func (k *Kube) writeTokens(t testing.TB) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s,%s,uid-%s,\"system:masters\"\n", kubeTokens[KubeAdmin], KubeAdmin, KubeAdmin)
	fmt.Fprintf(&b, "%s,%s,uid-%s\n", kubeTokens[KubeUser], KubeUser, KubeUser)
	if err := os.WriteFile(filepath.Join(k.dir, "tokens.csv"), []byte(b.String()), 0o600); err != nil {
		t.Fatalf("write the token file: %v", err)
	}
}

// startLocked starts the apiserver on k.port if set, else on a free port.
// k.mu must be held.
func (k *Kube) startLocked(t testing.TB) {
	t.Helper()
	args := func(port int) []string {
		return []string{
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(port),
			"--cert-dir=" + filepath.Join(k.dir, "certs"),
			"--tls-cert-file=" + k.pki.ServerCert,
			"--tls-private-key-file=" + k.pki.ServerKey,
			"--service-account-key-file=" + k.saCert,
			"--service-account-signing-key-file=" + k.sa,
			"--service-account-issuer=https://127.0.0.1:" + strconv.Itoa(port),
			"--token-auth-file=" + filepath.Join(k.dir, "tokens.csv"),
			"--authorization-mode=RBAC",
			"--disable-admission-plugins=ServiceAccount",
			"--endpoint-reconciler-type=none",
			"--etcd-servers=http://" + k.Etcd.Addr(),
			"--v=0",
		}
	}
	k.proc, k.port = launch(t, k.bin, k.dir, k.port, false, args, k.probe)
}

func (k *Kube) addr() string { return etcdAddr(k.port) }

// URL returns the apiserver's address, "https://127.0.0.1:port". It stays
// the same across Restart.
func (k *Kube) URL() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return "https://" + k.addr()
}

// CAFile returns the path of the certificate of the authority that signed
// the apiserver's.
func (k *Kube) CAFile() string { return k.pki.CAFile }

// Token returns the bearer token of user (KubeAdmin or KubeUser).
func (k *Kube) Token(user string) string { return kubeTokens[user] }

// probe checks that the apiserver on port reports itself ready.
func (k *Kube) probe(port, pid int) error {
	_, err := k.request(context.Background(), etcdAddr(port), http.MethodGet, "/readyz", nil)
	return err
}

// request makes one request as KubeAdmin to the apiserver at addr and
// returns the body of a 2xx answer.
func (k *Kube) request(ctx context.Context, addr, method, path string, body []byte) ([]byte, error) {
	ca, err := os.ReadFile(k.pki.CAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	c := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	req, err := http.NewRequestWithContext(ctx, method, "https://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+kubeTokens[KubeAdmin])
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s answered %s: %s", method, path, resp.Status, lastLines(b, 5))
	}
	return b, nil
}

// WriteKubeconfig writes a kubeconfig file for user (KubeAdmin or
// KubeUser) that reaches the apiserver at server ("" for URL()), with
// namespace as the context's default, and returns its path. A test points
// server at a Proxy in front of the apiserver to cut it off.
func (k *Kube) WriteKubeconfig(t testing.TB, user, server, namespace string) string {
	t.Helper()
	if server == "" {
		server = k.URL()
	}
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: dlock
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    token: %s
contexts:
- name: dlock
  context:
    cluster: dlock
    user: %s
    namespace: %s
current-context: dlock
`, server, k.pki.CAFile, user, kubeTokens[user], user, namespace)
	f, err := os.CreateTemp(k.dir, "kubeconfig-"+user+"-*")
	if err != nil {
		t.Fatalf("create a kubeconfig: %v", err)
	}
	defer f.Close()
	if _, err := f.WriteString(cfg); err != nil {
		t.Fatalf("write %s: %v", f.Name(), err)
	}
	return f.Name()
}

// GrantLeases lets KubeUser get, list, watch, create, update, patch and
// delete Leases in namespace, and nothing else, through a Role and a
// RoleBinding that KubeAdmin creates (both named dlock-leases).
func (k *Kube) GrantLeases(t testing.TB, namespace string) {
	t.Helper()
	role := `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"dlock-leases"},
"rules":[{"apiGroups":["coordination.k8s.io"],"resources":["leases"],"verbs":["get","list","watch","create","update","patch","delete"]}]}`
	binding := `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"dlock-leases"},
"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"dlock-leases"},
"subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"` + KubeUser + `"}]}`
	base := "/apis/rbac.authorization.k8s.io/v1/namespaces/" + namespace
	k.Admin(t, http.MethodPost, base+"/roles", role)
	k.Admin(t, http.MethodPost, base+"/rolebindings", binding)
}

// Admin makes one request as KubeAdmin with a JSON body ("" for none),
// fails the test unless it succeeds, and returns the answer's body.
func (k *Kube) Admin(t testing.TB, method, path, body string) []byte {
	t.Helper()
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	out, err := k.request(t.Context(), strings.TrimPrefix(k.URL(), "https://"), method, path, b)
	if err != nil {
		t.Fatalf("kube-apiserver: %v", err)
	}
	return out
}
