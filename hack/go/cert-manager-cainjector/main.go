// Command cert-manager-cainjector injects CA bundles into webhook configurations, API
// services and CRD conversion webhooks, from the Certificates or Secrets their
// cert-manager.io/inject-ca-from annotations name. The reconcilers are cert-manager's
// own, from its Go module at the pinned version; this file only wires them into a
// controller-runtime manager, because cert-manager's cmd/cainjector is a separate
// module that the Go module proxy does not serve.
package main

import (
	"flag"
	"fmt"
	"os"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func main() {
	// controller-runtime registers --kubeconfig on the command line itself.
	klog.InitFlags(flag.CommandLine)
	flag.Parse()
	logf.InitLogs()
	ctrl.SetLogger(klog.Background())
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cert-manager-cainjector:", err)
		os.Exit(1)
	}
}

func run() error {
	config, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	// The user agent names the field manager of the CA bundles it applies.
	config = util.RestConfigWithUserAgent(config, "cainjector")
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, admissionv1.AddToScheme, apiextensionsv1.AddToScheme,
		apiregistrationv1.AddToScheme, cmapi.AddToScheme,
	} {
		utilruntime.Must(add(scheme))
	}
	manager, err := ctrl.NewManager(config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	err = cainjector.RegisterAllInjectors(ctx, manager, cainjector.SetupOptions{
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   true,
			cainjector.ValidatingWebhookConfigurationName: true,
			cainjector.APIServiceName:                     true,
			cainjector.CustomResourceDefinitionName:       true,
		},
	})
	if err != nil {
		return err
	}
	return manager.Start(ctx)
}
