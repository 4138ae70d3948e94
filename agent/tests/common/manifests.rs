//! Kubernetes manifests the agent's tests build their state files from.

/// A `LoadBalancer` Service `default/web`, port 80 → 8080, VIP 198.18.100.1;
/// `extra` is one more line of its `spec`.
pub fn service(policy: &str, extra: &str) -> String {
    format!(
        r#"
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: default}}
spec:
  type: LoadBalancer
  externalTrafficPolicy: {policy}
  ports: [{{name: http, port: 80, targetPort: 8080, protocol: TCP}}]
  {extra}
status: {{loadBalancer: {{ingress: [{{ip: 198.18.100.1}}]}}}}
"#
    )
}

/// The EndpointSlice of `default/web` with these `endpoints:` items.
pub fn slice(endpoints: &str) -> String {
    format!(
        r#"
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: web-1, namespace: default, labels: {{kubernetes.io/service-name: web}}}}
addressType: IPv4
ports: [{{name: http, port: 8080, protocol: TCP}}]
endpoints:
{endpoints}
"#
    )
}
