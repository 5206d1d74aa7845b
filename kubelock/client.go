package kubelock

import (
	"context"
	"fmt"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// LeaseClient is what kubelock needs of a client of one namespace's
// Leases: the methods of client-go's typed LeaseInterface
// (k8s.io/client-go/kubernetes/typed/coordination/v1) that it calls.
type LeaseClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordv1.Lease, error)
	List(ctx context.Context, opts metav1.ListOptions) (*coordv1.LeaseList, error)
	Create(ctx context.Context, lease *coordv1.Lease, opts metav1.CreateOptions) (*coordv1.Lease, error)
	Update(ctx context.Context, lease *coordv1.Lease, opts metav1.UpdateOptions) (*coordv1.Lease, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// restLeases is the LeaseClient of store URLs: the Leases of one namespace
// through a REST client that knows coordination.k8s.io/v1 alone. It makes
// the requests client-go's typed client makes; that client is not used
// because importing it registers every API group's types in client-go's
// scheme, which adds about 18 MB to every binary that links kubelock.
type restLeases struct {
	client    *rest.RESTClient
	params    runtime.ParameterCodec
	namespace string
}

// newRESTLeases returns the LeaseClient of namespace's Leases through cfg,
// which it completes as client-go's typed client does (API path, group
// version, serializers, user agent).
func newRESTLeases(cfg *rest.Config, namespace string) (*restLeases, error) {
	scheme := runtime.NewScheme()
	if err := coordv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("kubelock: scheme: %w", err)
	}
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &coordv1.SchemeGroupVersion
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	client, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubelock: %w", err)
	}
	return &restLeases{client: client, params: runtime.NewParameterCodec(scheme), namespace: namespace}, nil
}

// Get implements LeaseClient.
func (c *restLeases) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordv1.Lease, error) {
	out := &coordv1.Lease{}
	err := c.client.Get().Namespace(c.namespace).Resource("leases").Name(name).
		VersionedParams(&opts, c.params).Do(ctx).Into(out)
	return out, err
}

// List implements LeaseClient.
func (c *restLeases) List(ctx context.Context, opts metav1.ListOptions) (*coordv1.LeaseList, error) {
	out := &coordv1.LeaseList{}
	err := c.client.Get().Namespace(c.namespace).Resource("leases").
		VersionedParams(&opts, c.params).Do(ctx).Into(out)
	return out, err
}

// Create implements LeaseClient.
func (c *restLeases) Create(ctx context.Context, lease *coordv1.Lease, opts metav1.CreateOptions) (*coordv1.Lease, error) {
	out := &coordv1.Lease{}
	err := c.client.Post().Namespace(c.namespace).Resource("leases").
		VersionedParams(&opts, c.params).Body(lease).Do(ctx).Into(out)
	return out, err
}

// Update implements LeaseClient.
func (c *restLeases) Update(ctx context.Context, lease *coordv1.Lease, opts metav1.UpdateOptions) (*coordv1.Lease, error) {
	out := &coordv1.Lease{}
	err := c.client.Put().Namespace(c.namespace).Resource("leases").Name(lease.Name).
		VersionedParams(&opts, c.params).Body(lease).Do(ctx).Into(out)
	return out, err
}

// Watch implements LeaseClient.
func (c *restLeases) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	var timeout time.Duration
	if opts.TimeoutSeconds != nil {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	opts.Watch = true
	return c.client.Get().Namespace(c.namespace).Resource("leases").
		VersionedParams(&opts, c.params).Timeout(timeout).Watch(ctx)
}
