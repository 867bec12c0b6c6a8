// Command cert-manager-controller runs cert-manager's certificate controllers (the
// self-signed and CA issuers, certificate issuance, renewal and readiness) against a
// cluster. The controllers are cert-manager's own, from its Go module at the pinned
// version; this file only wires them up, because cert-manager's cmd/controller is a
// separate module that the Go module proxy does not serve.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"time"

	controllerpkg "github.com/cert-manager/cert-manager/pkg/controller"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"k8s.io/klog/v2"

	// Each import registers its controller with controllerpkg.Known().
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	// The issuer types the issuers controller can set up.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster to manage")
	clusterResourceNamespace := flag.String("cluster-resource-namespace", "cert-manager",
		"namespace of the Secrets that ClusterIssuers refer to")
	workers := flag.Int("workers", 5, "workers per controller")
	klog.InitFlags(flag.CommandLine)
	flag.Parse()
	logf.InitLogs()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, klog.Background(), "cert-manager-controller")
	if err := run(ctx, *kubeconfig, *clusterResourceNamespace, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "cert-manager-controller:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, clusterResourceNamespace string, workers int) error {
	factory, err := controllerpkg.NewContextFactory(ctx, controllerpkg.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   20,
		KubernetesAPIBurst: 50,
		IssuerOptions:      controllerpkg.IssuerOptions{ClusterResourceNamespace: clusterResourceNamespace},
		// cert-manager's defaults for a failing request's back-off.
		CertificateOptions: controllerpkg.CertificateOptions{
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		return err
	}
	names := make([]string, 0, len(controllerpkg.Known()))
	for name := range controllerpkg.Known() {
		names = append(names, name)
	}
	sort.Strings(names)
	// Every controller registers its informers while it is constructed; the shared
	// factories start once all of them have.
	controllers := make(map[string]controllerpkg.Interface, len(names))
	for _, name := range names {
		controller, err := controllerpkg.Known()[name](factory)
		if err != nil {
			return fmt.Errorf("constructing %s: %w", name, err)
		}
		controllers[name] = controller
	}
	shared, err := factory.Build()
	if err != nil {
		return err
	}
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	shared.SharedInformerFactory.Start(ctx.Done())
	shared.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())

	var wg sync.WaitGroup
	errs := make(chan error, len(controllers))
	for name, controller := range controllers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			klog.InfoS("starting controller", "controller", name)
			if err := controller.Run(workers, ctx); err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}
