package main

import "testing"

// TestRealVersion attacks the check of committed requirements with what
// extra/ modules once required: v0.0.0, a version nothing serves, which
// builds inside the repository through its replace and fails for every
// user. A pseudo-version of a commit of the repository passes; one of a
// made-up commit does not.
func TestRealVersion(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	head, err := headPseudoVersion(root)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		version string
		want    bool
	}{
		{head, true},
		{"v0.0.0", false},
		{"v0.0.0-00010101000000-000000000000", false},
	}
	if !shallow(root) { // a shallow clone cannot refute a commit
		cases = append(cases, struct {
			version string
			want    bool
		}{"v0.0.0-20261126022123-0123456789ab", false})
	}
	for _, tc := range cases {
		if got := realVersion(root, repoPrefix+"/redislock", tc.version); got != tc.want {
			t.Errorf("realVersion(%s) = %v, want %v", tc.version, got, tc.want)
		}
	}
}
