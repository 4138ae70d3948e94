//! Hostile and careless requests get a `Status` that names what is wrong,
//! the server never falls over, and the store keeps its last good state:
//! malformed JSON and YAML, wrong types, unknown fields, oversized bodies,
//! invalid names and labels, a resourceVersion from the future, selectors
//! that do not parse, and a body cut short mid-request.

#[macro_use]
mod common;
use common::{item_names, ok, server_status, text, write, Backend, Server};

const POD: &str = "apiVersion: v1
kind: Pod
metadata: {name: good, namespace: default}
spec: {containers: [{name: c, image: x}]}
";

/// `kubectl create --raw` of `body` to the pods collection; the Status.
fn post_raw(s: &Server, name: &str, body: &[u8]) -> (bool, String, Option<serde_json::Value>) {
    let p = s.dir.join(name);
    std::fs::write(&p, body).expect("write body");
    let o = s.kubectl(
        "admin",
        &[
            "create",
            "--raw",
            "/api/v1/namespaces/default/pods",
            "-f",
            &p.display().to_string(),
            "-v=6",
        ],
    );
    (o.status.success(), text(&o), server_status(&o))
}

fn bad_input(backend: Backend) {
    let s = Server::start(&format!("bad-{backend:?}").to_lowercase(), backend);
    let pod = write(&s, "pod.yaml", POD);
    ok(&s, "admin", &["create", "-f", &pod]);
    let before = ok(&s, "admin", &["get", "pods", "-o", "json"]);

    let big = format!(
        "{{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{{\"name\":\"big\",\"annotations\":{{\"a\":\"{}\"}}}}}}",
        "x".repeat(4 * 1024 * 1024)
    );
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("truncated JSON", br#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"na"#.to_vec(), "not valid JSON"),
        ("not an object", b"[1, 2, 3]".to_vec(), "must be a Pod object"),
        ("empty", b" ".to_vec(), "not valid JSON"),
        (
            "wrong type",
            br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"t"},"spec":{"containers":"c"}}"#.to_vec(),
            "spec.containers",
        ),
        (
            "bad name",
            br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"Bad_Name"},"spec":{"containers":[]}}"#.to_vec(),
            "metadata.name",
        ),
        (
            "bad label",
            br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"l","labels":{"app":"a b"}},"spec":{"containers":[]}}"#.to_vec(),
            "metadata.labels[app]",
        ),
        (
            "deeply nested",
            format!("{{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{{\"name\":\"d\"}},\"x\":{}{}}}", "[".repeat(10_000), "]".repeat(10_000)).into_bytes(),
            "not valid JSON",
        ),
        ("oversized", big.into_bytes(), "larger than"),
    ];
    for (what, body, want) in cases {
        let (success, out, status) = post_raw(&s, "body.json", &body);
        assert!(!success, "{what}: accepted");
        let msg = status
            .as_ref()
            .and_then(|st| st["message"].as_str().map(String::from))
            .unwrap_or_else(|| out.clone());
        let causes = status
            .as_ref()
            .map(|st| st["details"].to_string())
            .unwrap_or_default();
        assert!(
            msg.contains(want) || causes.contains(want) || out.contains(want),
            "{what}: want {want:?} in\n{msg}\n{causes}\n{}",
            &out[..out.len().min(2000)]
        );
    }

    for (what, path, want) in [
        (
            "label selector",
            "/api/v1/pods?labelSelector=a%20in%20b",
            "labelSelector",
        ),
        (
            "field selector",
            "/api/v1/pods?fieldSelector=spec.colour%3Dred",
            "field label not supported",
        ),
        (
            "future resourceVersion",
            "/api/v1/pods?resourceVersion=999999999",
            "Too large resource version",
        ),
        (
            "garbage continue",
            "/api/v1/pods?limit=1&continue=zz",
            "continue",
        ),
        ("bad limit", "/api/v1/pods?limit=-1", "limit"),
    ] {
        let o = s.kubectl("admin", &["get", "--raw", path]);
        assert!(!o.status.success(), "{what}");
        assert!(text(&o).contains(want), "{what}: {}", text(&o));
    }

    // A watch from a version the store has not reached: after a short
    // wait, kube-apiserver's in-stream 504 with the cause client-go checks.
    let o = s.kubectl(
        "admin",
        &[
            "get",
            "--raw",
            "/api/v1/pods?watch=true&resourceVersion=999999999",
        ],
    );
    let out = text(&o);
    let event: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_default();
    assert_eq!(event["type"], "ERROR", "{out}");
    assert_eq!(event["object"]["code"], 504, "{out}");
    assert_eq!(
        event["object"]["details"]["causes"][0]["reason"], "ResourceVersionTooLarge",
        "{out}"
    );

    // A body cut short: Content-Length promises more than arrives.
    let token = s.admin_token();
    let head = format!(
        "POST /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n{{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{{\"name\":\"cut\"",
    );
    let answer = s.raw(head.as_bytes());
    assert!(
        !answer.contains(" 201 "),
        "a cut body was accepted: {answer}"
    );
    // Garbage instead of HTTP.
    let answer = s.raw(b"\x00\x01\x02 not http at all\r\n\r\n");
    assert!(!answer.contains(" 200 "), "{answer}");

    // The server still answers and holds exactly what it held.
    let after = ok(&s, "admin", &["get", "pods", "-o", "json"]);
    let names = |j: &str| item_names(&serde_json::from_str(j).expect("json"));
    assert_eq!(names(&after), names(&before));
    assert_eq!(names(&after), vec!["good"]);
}

on_both_stores!(bad_input);

/// Connections that finish TLS and then say nothing (or stop after an
/// answer) are closed after `--idle-timeout`, on HTTP/1.1 and HTTP/2
/// alike, so a flood of them cannot hold the server's sockets; a client
/// that talks is served meanwhile, and a watch outlives the timeout.
#[test]
fn idle_connections_are_closed() {
    let s = Server::start_with_args("idle", None, None, &["--idle-timeout", "1"]);
    std::thread::scope(|scope| {
        let silent: Vec<_> = (0..40)
            .map(|i| {
                let alpn = if i % 2 == 0 { "h2" } else { "http/1.1" };
                let s = &s;
                scope.spawn(move || (alpn, s.raw_closed(b"", Some(alpn)).1))
            })
            .collect();
        // Served while the silent ones wait.
        ok(&s, "admin", &["get", "namespaces"]);
        for h in silent {
            let (alpn, closed) = h.join().expect("thread");
            // Closed by the server, not ended by the client's own read
            // timeout.
            assert!(closed, "{alpn}: the server kept a silent connection open");
        }
    });
    // A keep-alive connection after its answer is closed too.
    let token = s.admin_token();
    let (answer, closed) = s.raw_closed(
        format!("GET /healthz HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n")
            .as_bytes(),
        Some("http/1.1"),
    );
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(closed, "an idle keep-alive connection stayed open");
    // A watch is an answer in progress: it outlives the idle timeout.
    let log = s.dir.join("watch.log");
    let mut w = s.kubectl_spawn(
        "admin",
        &["get", "namespaces", "-w", "--request-timeout", "0"],
        &log,
    );
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(
        w.try_wait().expect("wait").is_none(),
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let _ = w.kill();
    let _ = w.wait();
}

/// One HTTP/2 frame: length, type, flags, stream, payload.
fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A header as HPACK's literal without indexing, new name, no Huffman.
fn hpack(out: &mut Vec<u8>, name: &str, value: &str) {
    out.push(0);
    for s in [name, value] {
        assert!(s.len() < 127, "one-byte lengths only");
        out.push(s.len() as u8);
        out.extend_from_slice(s.as_bytes());
    }
}

/// An HTTP/2 request refused before its body matters (a `dryRun` no
/// server knows) gets its whole answer before anything ends the stream:
/// the client here sends the headers, waits, then the body, as a client
/// uploading does. (The server answers without reading the body; a
/// RST_STREAM with NO_ERROR may follow the answer, which RFC 9113 8.1
/// allows. curl 7.88 reports that reset as an error while its upload is
/// unfinished; kubectl and kube-rs take the answer.)
#[test]
fn early_refusals_reach_http2_clients_whole() {
    use std::io::{Read, Write};
    let s = Server::start("h2early", Backend::Embedded);
    let mut tls = s.tls(Some("h2"));
    let mut headers = Vec::new();
    hpack(&mut headers, ":method", "POST");
    hpack(&mut headers, ":scheme", "https");
    hpack(
        &mut headers,
        ":path",
        "/api/v1/namespaces/default/services?dryRun=Bogus",
    );
    hpack(&mut headers, ":authority", "127.0.0.1");
    hpack(&mut headers, "content-type", "application/json");
    let token = format!("Bearer {}", s.admin_token());
    hpack(&mut headers, "authorization", &token);
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    hello.extend(h2_frame(4, 0, 0, &[])); // SETTINGS
    hello.extend(h2_frame(1, 0x4, 1, &headers)); // HEADERS, END_HEADERS
    tls.write_all(&hello).expect("headers");
    tls.flush().expect("flush");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let body = br#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":80}]}}"#;
    // The stream may already be reset (the old behaviour): then this
    // write is simply ignored by the server.
    let _ = tls.write_all(&h2_frame(0, 0x1, 1, body)); // DATA, END_STREAM
    let _ = tls.flush();
    let mut buf = Vec::new();
    let mut answer = Vec::new();
    let mut chunk = [0u8; 16384];
    loop {
        while buf.len() >= 9 {
            let len =
                (usize::from(buf[0]) << 16) | (usize::from(buf[1]) << 8) | usize::from(buf[2]);
            if buf.len() < 9 + len {
                break;
            }
            let (kind, flags) = (buf[3], buf[4]);
            let stream = u32::from_be_bytes([buf[5], buf[6], buf[7], buf[8]]) & 0x7fff_ffff;
            let payload: Vec<u8> = buf[9..9 + len].to_vec();
            buf.drain(..9 + len);
            match (kind, stream) {
                (0, 1) => {
                    answer.extend_from_slice(&payload);
                    if flags & 0x1 != 0 {
                        let text = String::from_utf8_lossy(&answer);
                        assert!(
                            text.contains(r#"dryRun: Unsupported value: \"Bogus\""#),
                            "{text}"
                        );
                        return;
                    }
                }
                (3, 1) => panic!(
                    "stream reset (code {:?}) before the answer was whole: {:?}",
                    payload,
                    String::from_utf8_lossy(&answer)
                ),
                (7, _) => panic!("GOAWAY: {:?}", String::from_utf8_lossy(&payload)),
                _ => {}
            }
        }
        let n = tls
            .read(&mut chunk)
            .expect("the answer before the read timeout");
        assert!(n > 0, "closed before the answer");
        buf.extend_from_slice(&chunk[..n]);
    }
}
