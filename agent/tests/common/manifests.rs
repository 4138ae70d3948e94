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

/// `services` `Cluster` Services (`default/svc-<i>`, one VIP each in
/// 198.18.128.0/17, port 80 → 8080) with `endpoints` ready endpoints each,
/// on a node not in the file: a large, valid state whose Maglev tables are
/// all full size. No Node: callers put their own first.
pub fn many_services(services: usize, endpoints: usize) -> String {
    let mut s = String::with_capacity(services * (700 + endpoints * 110));
    for i in 0..services {
        let vip = format!("198.18.{}.{}", 128 + i / 250, 1 + i % 250);
        s.push_str(&format!(
            "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: svc-{i}\n  namespace: default\n\
             spec:\n  type: LoadBalancer\n  externalTrafficPolicy: Cluster\n  ports:\n  - name: http\n    port: 80\n    targetPort: 8080\n    protocol: TCP\n\
             status:\n  loadBalancer:\n    ingress:\n    - ip: {vip}\n\
             ---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: svc-{i}-v4\n  namespace: default\n  labels:\n    kubernetes.io/service-name: svc-{i}\n\
             addressType: IPv4\nports:\n- name: http\n  port: 8080\n  protocol: TCP\nendpoints:\n"
        ));
        for e in 0..endpoints {
            let n = i * endpoints + e;
            s.push_str(&format!(
                "- addresses: [\"198.19.{}.{}\"]\n  conditions: {{ready: true, serving: true, terminating: false}}\n  nodeName: node-9\n",
                100 + (n / 250) % 150,
                1 + n % 250
            ));
        }
    }
    s
}
