package testserver

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// ZooKeeperTick is the tickTime of servers started by StartZooKeeper. The
// server accepts session timeouts from 2 to 20 ticks (1 s to 10 s).
const ZooKeeperTick = 500 * time.Millisecond

// zkClasspath holds the Debian zookeeper package's jars and its log4j
// configuration.
const zkClasspath = "/usr/share/java/*:/etc/zookeeper/conf"

// ZooKeeper is a standalone ZooKeeper server started by StartZooKeeper. Its
// methods are safe for concurrent use.
type ZooKeeper struct {
	java string
	dir  string // holds zoo.cfg, data/ and server.log; kept across restarts
	port int    // kept across restarts
	opts zooKeeperOptions

	server
}

// ZooKeeperOption configures a server started by StartZooKeeper.
type ZooKeeperOption func(*zooKeeperOptions)

type zooKeeperOptions struct {
	containerCheck time.Duration
	enforceQuota   bool
}

// EnforceQuota makes the server refuse creates beyond a path's hard
// quota (ZooKeeper's zookeeper.enforceQuota), set with SetCountQuota.
func EnforceQuota() ZooKeeperOption {
	return func(o *zooKeeperOptions) { o.enforceQuota = true }
}

// ContainerCheck makes the server look for empty container znodes to
// delete every d (ZooKeeper's znode.container.checkIntervalMs) instead of
// every minute.
func ContainerCheck(d time.Duration) ZooKeeperOption {
	return func(o *zooKeeperOptions) { o.containerCheck = d }
}

// StartZooKeeper starts a standalone ZooKeeper server (Debian's zookeeper
// package, run with java) on a free loopback port, with its data in a
// temporary directory, tickTime ZooKeeperTick, forceSync=no (its
// transaction log is written but not fsynced, as the other test servers
// run without fsync: a kill -9 loses nothing, only a machine crash
// would), the admin server disabled and
// the four-letter words ruok, conf, srvr, wchs and mntr allowed (digest auth needs
// no configuration: any client may authenticate as any user:password, and
// ACLs are enforced). It returns once the server answers. The server is killed when the test ends. If java or the
// ZooKeeper jars are missing, StartZooKeeper skips the test (see Need).
//
// A JVM takes a few seconds to start: share one server between the subtests
// of a test function.
func StartZooKeeper(t testing.TB, opts ...ZooKeeperOption) *ZooKeeper {
	t.Helper()
	java := Need(t, "java", "zookeeper")
	if _, err := os.Stat("/usr/share/java/zookeeper.jar"); err != nil {
		if Require() {
			t.Fatalf("ZooKeeper jars not found, but DLOCK_REQUIRE_SERVERS=1 demands real servers; install them with: apt-get install zookeeper")
		}
		t.Skipf("ZooKeeper jars not found (%v); run ./scripts/test (installs servers) or set DLOCK_REQUIRE_SERVERS=1", err)
	}
	z := &ZooKeeper{java: java, dir: t.TempDir()}
	for _, o := range opts {
		o(&z.opts)
	}
	z.server = server{name: "zookeeper", where: z.addr, start: z.startLocked}
	z.startAndStop(t)
	return z
}

// startLocked starts the server on z.port (a free port if 0) over the data
// in z.dir. z.mu must be held.
func (z *ZooKeeper) startLocked(t testing.TB) {
	t.Helper()
	data := filepath.Join(z.dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatalf("create zookeeper data directory: %v", err)
	}
	args := func(port int) []string {
		cfg := filepath.Join(z.dir, "zoo.cfg")
		conf := fmt.Sprintf(`tickTime=%d
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok,conf,srvr,wchs,mntr,cons
maxClientCnxns=0
forceSync=no
`, ZooKeeperTick.Milliseconds(), data, port)
		if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
			t.Fatalf("write zoo.cfg: %v", err)
		}
		a := []string{
			"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
			"-Dzookeeper.root.logger=INFO,CONSOLE",
			"-Dzookeeper.log.dir=" + z.dir,
		}
		if d := z.opts.containerCheck; d > 0 {
			a = append(a, fmt.Sprintf("-Dznode.container.checkIntervalMs=%d", max(d.Milliseconds(), 1)))
		}
		if z.opts.enforceQuota {
			a = append(a, "-Dzookeeper.enforceQuota=true")
		}
		return append(a, "-cp", zkClasspath, "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg)
	}
	probe := func(port, pid int) error { return probeZooKeeper(port, data) }
	z.proc, z.port = launch(t, z.java, z.dir, z.port, false, args, probe)
}

// probeZooKeeper asks the server on port for its configuration ("conf")
// and checks that it is the one serving dataDir.
func probeZooKeeper(port int, dataDir string) error {
	out, err := fourLetterWord(port, "conf")
	if err != nil {
		return err
	}
	if !strings.Contains(out, "dataDir="+dataDir) {
		if strings.Contains(out, "not currently serving") {
			return fmt.Errorf("zookeeper not serving yet")
		}
		return fmt.Errorf("127.0.0.1:%d is not the zookeeper serving %s: %q", port, dataDir, out)
	}
	return nil
}

func fourLetterWord(port int, cmd string) (string, error) {
	conn, err := net.DialTimeout("tcp", zkAddr(port), time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(conn, cmd); err != nil {
		return "", err
	}
	b, err := io.ReadAll(conn)
	return string(b), err
}

func zkAddr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// Addr returns the server's address, "127.0.0.1:port". It stays the same
// across Restart.
func (z *ZooKeeper) Addr() string {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.addr()
}

func (z *ZooKeeper) addr() string { return zkAddr(z.port) }

// Conn connects to the server with the given session timeout and returns
// once the session is established. The connection logs nothing and is
// closed when the test ends.
func (z *ZooKeeper) Conn(t testing.TB, sessionTimeout time.Duration) *zk.Conn {
	t.Helper()
	c, events, err := zk.Connect([]string{z.Addr()}, sessionTimeout, zk.WithLogger(quietLogger{}))
	if err != nil {
		t.Fatalf("connect to zookeeper on %s: %v", z.Addr(), err)
	}
	t.Cleanup(c.Close)
	timeout := time.After(startTimeout)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return c
			}
		case <-timeout:
			t.Fatalf("no zookeeper session with %s within %v (state %v)", z.Addr(), startTimeout, c.State())
		}
	}
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// Watches returns the number of watches the server has set (four-letter
// word wchs).
func (z *ZooKeeper) Watches(t testing.TB) int {
	t.Helper()
	out, err := fourLetterWord(z.port0(), "wchs")
	if err != nil {
		t.Fatalf("wchs on zookeeper %s: %v", z.Addr(), err)
	}
	_, after, ok := strings.Cut(out, "Total watches:")
	n, err := strconv.Atoi(strings.TrimSpace(after))
	if !ok || err != nil {
		t.Fatalf("wchs on zookeeper %s answered %q", z.Addr(), out)
	}
	return n
}

// SessionTimeouts returns the timeout the server negotiated for the
// session of each client connection (four-letter word cons), by session
// id.
func (z *ZooKeeper) SessionTimeouts(t testing.TB) map[int64]time.Duration {
	t.Helper()
	out, err := fourLetterWord(z.port0(), "cons")
	if err != nil {
		t.Fatalf("cons on zookeeper %s: %v", z.Addr(), err)
	}
	m := make(map[int64]time.Duration)
	for _, match := range consSession.FindAllStringSubmatch(out, -1) {
		sid, err1 := strconv.ParseInt(match[1], 16, 64)
		ms, err2 := strconv.ParseInt(match[2], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("cons on zookeeper %s answered %q", z.Addr(), out)
		}
		m[sid] = time.Duration(ms) * time.Millisecond
	}
	return m
}

// consSession matches a session's id and timeout in a line of cons.
var consSession = regexp.MustCompile(`sid=0x([0-9a-f]+),.*?\bto=([0-9]+)`)

func (z *ZooKeeper) port0() int {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.port
}

// Mntr returns the server's monitoring variables (four-letter word mntr),
// such as zk_znode_count, zk_watch_count and zk_ephemerals_count.
func (z *ZooKeeper) Mntr(t testing.TB) map[string]string {
	t.Helper()
	out, err := fourLetterWord(z.port0(), "mntr")
	if err != nil {
		t.Fatalf("mntr on zookeeper %s: %v", z.Addr(), err)
	}
	m := make(map[string]string)
	for line := range strings.Lines(out) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "\t"); ok {
			m[k] = v
		}
	}
	if _, ok := m["zk_znode_count"]; !ok {
		t.Fatalf("mntr on zookeeper %s answered %q", z.Addr(), out)
	}
	return m
}

// MntrInt returns the integer monitoring variable key (see Mntr).
func (z *ZooKeeper) MntrInt(t testing.TB, key string) int64 {
	t.Helper()
	v := z.Mntr(t)[key]
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("mntr on zookeeper %s: %s = %q, want an integer", z.Addr(), key, v)
	}
	return n
}

// Zxid returns the zxid of the last transaction the server applied (the
// Zxid line of four-letter word srvr).
func (z *ZooKeeper) Zxid(t testing.TB) int64 {
	t.Helper()
	out, err := fourLetterWord(z.port0(), "srvr")
	if err != nil {
		t.Fatalf("srvr on zookeeper %s: %v", z.Addr(), err)
	}
	_, after, ok := strings.Cut(out, "Zxid: 0x")
	hex, _, _ := strings.Cut(after, "\n")
	n, err := strconv.ParseInt(strings.TrimSpace(hex), 16, 64)
	if !ok || err != nil {
		t.Fatalf("srvr on zookeeper %s answered %q", z.Addr(), out)
	}
	return n
}

// SetCountQuota sets, through conn, a hard quota of n znodes on path and
// the znodes under it (path included), as the zkCli command setquota -N
// does. The server enforces it if started with EnforceQuota.
func SetCountQuota(t testing.TB, conn *zk.Conn, path string, n int) {
	t.Helper()
	q := "/zookeeper/quota" + path
	acl := zk.WorldACL(zk.PermAll)
	for i := len("/zookeeper/quota/"); i <= len(q); i++ {
		if i < len(q) && q[i] != '/' {
			continue
		}
		if _, err := conn.Create(q[:i], nil, 0, acl); err != nil && err != zk.ErrNodeExists {
			t.Fatalf("create %s: %v", q[:i], err)
		}
	}
	// The stats node first: creating the limits node then counts what
	// is under path into it.
	for _, f := range []struct{ name, data string }{
		{"zookeeper_stats", "count=0,bytes=0"},
		{"zookeeper_limits", fmt.Sprintf("count=-1,bytes=-1,countHardLimit=%d,byteHardLimit=-1", n)},
	} {
		if _, err := conn.Create(q+"/"+f.name, []byte(f.data), 0, acl); err != nil {
			t.Fatalf("create %s/%s: %v", q, f.name, err)
		}
	}
}
