#!/usr/bin/env python3
"""Captures the protobuf bodies kubectl sends, as test fixtures.

Why: tests/kubectl.rs compares each body kubectl sends for a command with
the JSON the same command prints with `--dry-run=client -o json`. This
re-makes both files for every command below, with the kubectl given (the
tests were captured with v1.37), so a new kubectl can be checked.

How: a throwaway HTTPS listener on 127.0.0.1 (self-signed certificate,
made with openssl) saves each POST body and answers 500, so kubectl stops
there; discovery GETs get a core/v1 with pods only. Nothing leaves the
machine.

Usage (from controller/wire):
    python3 tools/capture_kubectl.py /opt/sluice/kubectl-venv/bin/kubectl
"""
import http.server
import os
import ssl
import subprocess
import sys
import tempfile
import threading

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures")

# fixture name -> kubectl arguments (the JSON side adds --dry-run=client -o json
# before any `--` that starts the container's command).
COMMANDS = {
    "deployment_d1": ["create", "deployment", "d1", "--image=x"],
    "deployment_d2": ["create", "deployment", "d2", "--image=nginx", "--replicas=0", "--port=8080"],
    "service_s1": ["create", "service", "clusterip", "s1", "--tcp=80:8080"],
    "service_np1": ["create", "service", "nodeport", "np1", "--tcp=80:8080", "--node-port=30080"],
    "service_en1": ["create", "service", "externalname", "en1", "--external-name=example.com"],
    "namespace_n1": ["create", "namespace", "n1"],
    "pdb_p1": ["create", "poddisruptionbudget", "p1", "--selector=app=a", "--min-available=50%"],
    "pdb_p2": ["create", "poddisruptionbudget", "p2", "--selector=app=b", "--max-unavailable=1"],
    "configmap_c1": ["create", "configmap", "c1", "--from-literal=a=b", "--from-literal=empty="],
    "secret_sec1": ["create", "secret", "generic", "sec1", "--from-literal=k=v"],
    "secret_dr1": ["create", "secret", "docker-registry", "dr1", "--docker-server=r.io",
                   "--docker-username=u", "--docker-password=p"],
    "job_j1": ["create", "job", "j1", "--image=busybox", "--", "echo", "hi"],
    "cronjob_cj1": ["create", "cronjob", "cj1", "--image=busybox", "--schedule=*/5 * * * *",
                    "--", "date"],
    "ingress_i1": ["create", "ingress", "i1", "--rule=foo.com/bar=svc1:8080,tls=my-cert"],
    "role_r1": ["create", "role", "r1", "--verb=get,list", "--resource=pods"],
    "clusterrolebinding_crb1": ["create", "clusterrolebinding", "crb1", "--clusterrole=view",
                                "--user=alice", "--serviceaccount=default:sa1"],
    "priorityclass_pc1": ["create", "priorityclass", "pc1", "--value=1000", "--description=hi"],
    "quota_q1": ["create", "quota", "q1", "--hard=cpu=1,memory=1G,pods=2"],
    "serviceaccount_sa1": ["create", "serviceaccount", "sa1"],
    # No --dry-run for tokens: tests/kubectl.rs holds its JSON.
    "token_sa1": ["create", "token", "sa1", "--duration=10m"],
}

KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- cluster: {server: "https://127.0.0.1:%d", insecure-skip-tls-verify: true}
  name: c
users:
- name: u
  user: {token: capture}
contexts:
- context: {cluster: c, user: u, namespace: default}
  name: x
current-context: x
"""


DISCOVERY = {
    "/api": '{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[]}',
    "/apis": '{"kind":"APIGroupList","apiVersion":"v1","groups":[]}',
    "/api/v1": '{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"pods",'
               '"singularName":"pod","namespaced":true,"kind":"Pod","verbs":["get","list"]}]}',
}


class Capture(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    last_body = None

    def _answer(self, code):
        reason = "NotFound" if code == 404 else "InternalError"
        body = ('{"kind":"Status","apiVersion":"v1","status":"Failure","code":%d,'
                '"reason":"%s","message":"captured"}' % (code, reason)).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        # Just enough discovery for `create role --resource=pods` to map
        # its resource; anything else is not found.
        path = self.path.split("?")[0]
        found = DISCOVERY.get(path)
        if found is None:
            return self._answer(404)
        body = found.encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        if self.headers.get("Content-Type") == "application/vnd.kubernetes.protobuf":
            Capture.last_body = body
        self._answer(500)

    def log_message(self, *args):
        pass


def main():
    kubectl = sys.argv[1] if len(sys.argv) > 1 else "kubectl"
    tmp = tempfile.mkdtemp()
    cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1"],
                   check=True, capture_output=True)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Capture)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = os.path.join(tmp, "kubeconfig")
    with open(config, "w") as f:
        f.write(KUBECONFIG % server.server_address[1])
    base = [kubectl, "--kubeconfig", config]
    for name, args in COMMANDS.items():
        Capture.last_body = None
        subprocess.run(base + args, capture_output=True, timeout=60)
        if Capture.last_body is None:
            sys.exit("%s: kubectl sent no protobuf body" % name)
        with open(os.path.join(FIXTURES, name + ".pb"), "wb") as f:
            f.write(Capture.last_body)
        if name == "token_sa1":
            continue
        cut = args.index("--") if "--" in args else len(args)
        dry = args[:cut] + ["--dry-run=client", "-o", "json"] + args[cut:]
        out = subprocess.run(base + dry, capture_output=True, timeout=60, check=True)
        with open(os.path.join(FIXTURES, name + ".json"), "wb") as f:
            f.write(out.stdout)
        print("captured", name)
    server.shutdown()


main()
