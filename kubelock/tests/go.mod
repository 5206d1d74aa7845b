// dlock:unpublished: a test-only module; its tests need a real kube-apiserver (internal/testserver).
module github.com/dlock-go/dlock/kubelock/tests

go 1.26.0

require (
	github.com/dlock-go/dlock v0.0.0-20261126022123-99c02b3cd452
	github.com/dlock-go/dlock/internal/testserver v0.0.0-20261126022123-99c02b3cd452
	github.com/dlock-go/dlock/kubelock v0.0.0-20261126022123-99c02b3cd452
)

replace (
	github.com/dlock-go/dlock => ../..
	github.com/dlock-go/dlock/internal/testserver => ../../internal/testserver
	github.com/dlock-go/dlock/kubelock => ..
)
