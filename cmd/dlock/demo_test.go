package main

import "testing"

func testDemo(t *testing.T, store []string) {
	t.Helper()
	r := run(t, dlockCmd(t, append([]string{"demo", "--procs", "3", "--workers", "6", "--stock", "150"}, store...)...))
	wantCode(t, r, 0, "demo")
	if f := demoFigures(t, r.stdout)[0]; f["oversold"] != 0 || f["sold"] != 150 || f["stock left"] != 0 {
		t.Errorf("demo under the lock: %v, want 150 sold, 0 left, 0 oversold\n%s", f, r.stdout)
	}

	r = run(t, dlockCmd(t, append([]string{"demo", "--no-lock", "--procs", "3", "--workers", "6", "--stock", "150"}, store...)...))
	wantCode(t, r, 0, "demo --no-lock")
	if f := demoFigures(t, r.stdout)[0]; f["oversold"] == 0 {
		t.Errorf("demo --no-lock oversold nothing with 18 buyers, want overselling:\n%s", r.stdout)
	}

	r = run(t, dlockCmd(t, append([]string{"demo", "--pause", "--procs", "2", "--workers", "4", "--stock", "40"}, store...)...))
	wantCode(t, r, 0, "demo --pause")
	phases := demoFigures(t, r.stdout)
	if len(phases) != 2 {
		t.Fatalf("demo --pause printed %d summaries, want 2 (plain, fenced):\n%s", len(phases), r.stdout)
	}
	if p := phases[0]; p["sold"]+p["stock left"] == 40 {
		t.Errorf("plain writes with stalled holders: %v, want the stale writes to corrupt the count:\n%s", p, r.stdout)
	}
	if f := phases[1]; f["oversold"] != 0 || f["sold"]+f["stock left"] != 40 {
		t.Errorf("fenced writes with stalled holders: %v, want exact:\n%s", f, r.stdout)
	}
}

func TestDemoOnRedis(t *testing.T) {
	testDemo(t, []string{"--store", redisStore(t)})
}

func TestDemoOnDefaultStore(t *testing.T) {
	testDemo(t, nil)
}
