package testserver

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// NATS is a nats-server with JetStream started by StartNATS, alone or as
// a node of a NATSCluster. Its methods are safe for concurrent use.
// Restart keeps its ports and its JetStream store (-sd), so streams and
// their messages survive it.
type NATS struct {
	bin     string
	dir     string   // holds js/ and server.log; kept across restarts
	name    string   // the server's name (-n), unique in a cluster
	port    int      // client port, kept across restarts
	monitor int      // HTTP monitoring port, kept across restarts
	cluster []string // -cluster and -routes arguments; nil when alone

	server
}

// StartNATS starts a nats-server with JetStream (built by
// NATSServer.Build) on free loopback client and monitoring ports, with its
// store in a temporary directory, and returns once its /healthz reports
// JetStream enabled. The server is killed when the test ends.
func StartNATS(t testing.TB) *NATS {
	t.Helper()
	n := newNATS(t, NATSServer.Build(t), "n1", nil)
	n.startAndStop(t)
	return n
}

// newNATS returns a NATS that is not started yet.
func newNATS(t testing.TB, bin, name string, cluster []string) *NATS {
	t.Helper()
	n := &NATS{bin: bin, dir: t.TempDir(), name: name, monitor: freePort(t, false), cluster: cluster}
	n.server = server{name: "nats-server", where: n.Addr, start: n.startLocked}
	return n
}

// startLocked starts nats-server over the store in n.dir, on n.port if
// set and on a free port otherwise. n.mu must be held.
func (n *NATS) startLocked(t testing.TB) {
	t.Helper()
	args := func(port int) []string {
		a := []string{
			"-js", "-sd", filepath.Join(n.dir, "js"),
			"-a", "127.0.0.1", "-p", strconv.Itoa(port),
			"-m", strconv.Itoa(n.monitor),
			"-n", n.name,
		}
		return append(a, n.cluster...)
	}
	n.proc, n.port = launch(t, n.bin, n.dir, n.port, false, args, n.probe)
}

// probe checks that the server's monitoring port reports JetStream
// enabled.
func (n *NATS) probe(port, pid int) error {
	return n.health("/healthz?js-enabled-only=true")
}

// health returns nil if the monitoring endpoint path answers 200.
func (n *NATS) health(path string) error {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + natsAddr(n.monitor) + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s: %q", path, resp.Status, b)
	}
	return nil
}

// Addr returns the server's client address, host:port.
func (n *NATS) Addr() string { return natsAddr(n.port) }

// URL returns the server's client URL, nats://host:port.
func (n *NATS) URL() string { return "nats://" + n.Addr() }

// Name returns the server's name, as JetStream reports stream leaders.
func (n *NATS) Name() string { return n.name }

func natsAddr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// NATSCluster is a cluster of nats-servers with JetStream started by
// StartNATSCluster.
type NATSCluster struct {
	Nodes []*NATS
}

// StartNATSCluster starts size nats-servers with JetStream, routed to
// each other as one cluster on free loopback ports, and returns once
// every node's /healthz reports JetStream healthy (a meta leader
// elected). The servers are killed when the test ends.
func StartNATSCluster(t testing.TB, size int) *NATSCluster {
	t.Helper()
	bin := NATSServer.Build(t)
	routes := make([]string, size)
	ports := make([]int, size)
	for i := range ports {
		ports[i] = freePort(t, false)
		routes[i] = "nats://" + natsAddr(ports[i])
	}
	c := &NATSCluster{}
	for i := range size {
		args := []string{"-cluster", routes[i], "-cluster_name", "dlock", "-routes", strings.Join(routes, ",")}
		n := newNATS(t, bin, "n"+strconv.Itoa(i+1), args)
		n.startAndStop(t)
		c.Nodes = append(c.Nodes, n)
	}
	for _, n := range c.Nodes {
		waitHealthy(t, n, "/healthz")
	}
	return c
}

// waitHealthy waits until n's monitoring path answers 200.
func waitHealthy(t testing.TB, n *NATS, path string) {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	for {
		err := n.health(path)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server %s on %s: not healthy within %v: %v", n.name, n.Addr(), startTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// URL returns the cluster's client URL, every node's address after
// nats://, separated by commas.
func (c *NATSCluster) URL() string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return "nats://" + strings.Join(addrs, ",")
}

// StreamLeader returns the node that leads stream (a KV bucket's stream
// is "KV_" + the bucket's name), as the nodes that answer report it. It
// fails the test if none does.
func (c *NATSCluster) StreamLeader(t testing.TB, stream string) *NATS {
	t.Helper()
	for _, n := range c.Nodes {
		leader, err := n.streamLeader(stream)
		if err != nil || leader == "" {
			continue
		}
		for _, m := range c.Nodes {
			if m.name == leader {
				return m
			}
		}
	}
	t.Fatalf("nats cluster: no node reports a leader of stream %s", stream)
	return nil
}

// streamLeader returns the leader of stream that n's /jsz reports.
func (n *NATS) streamLeader(stream string) (string, error) {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + natsAddr(n.monitor) + "/jsz?accounts=true&streams=true")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var jsz struct {
		Accounts []struct {
			Streams []struct {
				Name    string `json:"name"`
				Cluster struct {
					Leader string `json:"leader"`
				} `json:"cluster"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&jsz); err != nil {
		return "", err
	}
	for _, a := range jsz.Accounts {
		for _, s := range a.Streams {
			if s.Name == stream {
				return s.Cluster.Leader, nil
			}
		}
	}
	return "", nil
}
