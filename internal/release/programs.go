package main

import (
	"fmt"
	"path/filepath"
	"strings"
)

// opener is a program that opens the store URL of its first argument with
// the backends of imports linked, as a user of dlock.Open writes it.
func opener(imports ...string) string {
	var b strings.Builder
	b.WriteString("package main\n\nimport (\n\t\"context\"\n\t\"fmt\"\n\t\"os\"\n\n\t\"github.com/dlock-go/dlock\"\n")
	for _, i := range imports {
		fmt.Fprintf(&b, "\t_ %q\n", i)
	}
	b.WriteString(")\n\nfunc main() {\n\tl, err := dlock.Open(context.Background(), os.Args[1])\n\tfmt.Println(l, err)\n}\n")
	return b.String()
}

const guardOnly = `package main

import (
	"fmt"

	"github.com/dlock-go/dlock/fence"
)

func main() {
	var g fence.Guard
	fmt.Println(g.Do(1, func() error { return nil }))
}
`

const bsmRedislock = `package main

import (
	"fmt"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
)

func main() {
	fmt.Println(redislock.New(redis.NewClient(&redis.Options{})))
}
`

// backends are the programs of one backend each: name, module, package.
var backends = [][3]string{
	{"redislock", "/redislock", "/redislock"},
	{"redlock", "/redlock", "/redlock"},
	{"rueidisredis", "/rueidisredis", "/rueidisredis"},
	{"valkeyredis", "/valkeyredis", "/valkeyredis"},
	{"postgres", "/sqllock", "/sqllock/postgres"},
	{"mysql", "/sqllock", "/sqllock/mysql"},
	{"sqlite", "/sqllock", "/sqllock"},
	{"etcdlock", "/etcdlock", "/etcdlock"},
	{"zklock", "/zklock", "/zklock"},
	{"natslock", "/natslock", "/natslock"},
	{"kubelock", "/kubelock", "/kubelock"},
}

// figures are the check's measurements, by program name.
type figures map[string]built

// run builds every program, installs the CLI, prints the figures and
// fails on any resolution error or any figure over its target.
func (u *user) run(mods []mod, tree string) error {
	figs := figures{}
	var failed []string
	add := func(p program) {
		b, err := u.build(p)
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", p.name, err))
			return
		}
		figs[p.name] = b
	}
	add(program{name: "root", gets: []string{repoPrefix}, src: opener()})
	add(program{name: "fence-guard", gets: []string{repoPrefix}, src: guardOnly})
	for _, b := range backends {
		add(program{name: b[0], gets: []string{repoPrefix + b[1]}, src: opener(repoPrefix + b[2])})
	}
	goRedis := requiredVersion(filepath.Join(tree, "redislock"), "github.com/redis/go-redis/v9")
	add(program{name: "bsm-redislock", gets: []string{"github.com/bsm/redislock@latest", "github.com/redis/go-redis/v9@" + goRedis}, src: bsmRedislock})
	for _, m := range mods {
		if strings.HasPrefix(m.Dir, "extra"+string(filepath.Separator)) {
			add(program{name: filepath.Base(m.Dir), gets: []string{m.Path}, src: opener(m.Path)})
		}
	}
	if _, err := u.go_(u.dir, "install", repoPrefix+"/cmd/dlock@"+u.version); err != nil {
		failed = append(failed, fmt.Sprintf("go install cmd/dlock: %v", err))
	} else {
		fmt.Printf("go install %s/cmd/dlock@%s: ok\n", repoPrefix, u.version)
	}
	failed = append(failed, figs.report()...)
	if len(failed) > 0 {
		return fmt.Errorf("publish-check failed:\n  %s", strings.Join(failed, "\n  "))
	}
	fmt.Println("publish-check: every module resolves, every figure is at or under its target")
	return nil
}
