//! Each clause of the scripts' contract, with small shell scripts written
//! to a temporary directory (removed on drop, also when a test fails).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::*;
use crate::instance::{InstanceState, NodeSpec};

struct Scripts {
    dir: TempDir,
    config: ExecConfig,
}

impl Scripts {
    fn new() -> Scripts {
        let dir = tempfile::tempdir().unwrap();
        let config = ExecConfig::in_dir(dir.path());
        Scripts { dir, config }
    }

    /// Write script `name` (`create`, `delete`, `list`); `$DIR` in `body`
    /// is the temporary directory.
    fn write(&self, name: &str, body: &str) {
        let path = self.dir.path().join(name);
        let text = format!("#!/bin/sh\nDIR='{}'\n{body}\n", self.dir.path().display());
        fs::write(&path, text).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn provider(&self) -> ExecProvider {
        ExecProvider::new(self.config.clone())
    }

    fn read(&self, name: &str) -> String {
        fs::read_to_string(self.dir.path().join(name)).unwrap()
    }
}

fn req() -> CreateNode {
    CreateNode {
        pool: "p".into(),
        zone: "zone-a".into(),
        name: "p-a-bcdf".into(),
        version: "1.33.2".into(),
        config: NodeSpec {
            cpu_milli: 2000,
            memory_bytes: 4 << 30,
            labels: Default::default(),
            taints: Vec::new(),
            spot: true,
        },
    }
}

const ECHO_INSTANCE: &str = r#"printf '{"name":"%s","pool":"%s","zone":"%s","version":"%s","state":"CREATING","createdAt":"2026-11-23T12:00:00Z"}\n' "$SLUICE_NODE_NAME" "$SLUICE_NODE_POOL" "$SLUICE_NODE_ZONE" "$SLUICE_NODE_VERSION""#;

fn failed(r: Result<impl std::fmt::Debug, ProviderError>) -> String {
    match r {
        Err(ProviderError::Failed(message)) => message,
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[tokio::test]
async fn create_gets_the_request_on_stdin_and_in_the_environment() {
    let s = Scripts::new();
    s.write(
        "create",
        &format!("cat > \"$DIR/request.json\"\n{ECHO_INSTANCE}"),
    );
    let instance = s.provider().create(req()).await.unwrap();
    assert_eq!(
        (
            instance.name.as_str(),
            instance.zone.as_str(),
            instance.version.as_str()
        ),
        ("p-a-bcdf", "zone-a", "1.33.2")
    );
    assert_eq!(instance.state, InstanceState::Creating);
    let sent: CreateNode = serde_json::from_str(&s.read("request.json")).unwrap();
    assert_eq!(sent, req());
}

#[tokio::test]
async fn create_is_told_the_run_limit_the_script_enforces() {
    // spec: A5 — the script ends the machine at createdAt + the limit, as
    // GKE ends a flex-start VM; the provider only tells it the limit.
    let s = Scripts::new();
    s.write(
        "create",
        &format!(
            "cat > \"$DIR/request.json\"\n\
             printf '%s' \"${{SLUICE_NODE_MAX_RUN_DURATION-unset}}\" > \"$DIR/run\"\n\
             {ECHO_INSTANCE}"
        ),
    );
    let mut limited = req();
    limited.config.labels.insert(
        crate::instance::MAX_RUN_DURATION_LABEL.into(),
        "3600s".into(),
    );
    s.provider().create(limited.clone()).await.unwrap();
    assert_eq!(s.read("run"), "3600s");
    let sent: serde_json::Value = serde_json::from_str(&s.read("request.json")).unwrap();
    assert_eq!(
        sent["config"]["labels"]["sluice.dev/max-run-duration"],
        "3600s"
    );
    // Without a limit the variable is there and empty, whatever the
    // controller's own environment holds.
    s.provider().create(req()).await.unwrap();
    assert_eq!(s.read("run"), "");
}

#[tokio::test]
async fn exit_75_with_a_quota_report_is_quota_exhausted() {
    let s = Scripts::new();
    s.write(
        "create",
        r#"echo '{"quota": {"resource": "CPUS", "limit": 24}}'; exit 75"#,
    );
    assert_eq!(
        s.provider().create(req()).await.unwrap_err(),
        ProviderError::QuotaExhausted {
            resource: "CPUS".into(),
            limit: 24
        }
    );
    s.write("create", "echo 'out of CPUs'; exit 75");
    let message = failed(s.provider().create(req()).await);
    assert!(
        message.contains("after exit 75") && message.contains("out of CPUs"),
        "{message}"
    );
}

#[tokio::test]
async fn any_other_exit_fails_with_its_stderr() {
    let s = Scripts::new();
    s.write("create", "echo 'no capacity in zone-a' >&2; exit 1");
    let message = failed(s.provider().create(req()).await);
    assert!(message.contains("create script"), "{message}");
    assert!(
        message.ends_with("exited with status 1: no capacity in zone-a"),
        "{message}"
    );
    s.write("create", "kill -9 $$");
    let message = failed(s.provider().create(req()).await);
    assert!(message.contains("killed by a signal"), "{message}");
}

#[tokio::test]
async fn garbage_on_stdout_is_an_error_naming_it() {
    let s = Scripts::new();
    s.write("create", "echo 'VM started!'");
    let message = failed(s.provider().create(req()).await);
    assert!(
        message.contains("stdout is not one JSON instance"),
        "{message}"
    );
    assert!(message.contains("VM started!"), "{message}");
    s.write("create", r#"echo '{"name": "p-a-bcdf"}'"#);
    let message = failed(s.provider().create(req()).await);
    assert!(message.contains("missing field"), "{message}");
    // Another instance than asked for.
    s.write(
        "create",
        &ECHO_INSTANCE.replace("\"$SLUICE_NODE_NAME\"", "other"),
    );
    let message = failed(s.provider().create(req()).await);
    assert!(
        message.contains("printed instance other of pool p"),
        "{message}"
    );
}

/// Whether process `pid` is gone (or dead, waiting for init to reap it),
/// waiting up to 10 s for the kernel to finish it off.
fn dead(pid: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return true,
            Ok(stat)
                if stat
                    .rsplit(')')
                    .next()
                    .is_some_and(|s| s.trim_start().starts_with('Z')) =>
            {
                return true
            }
            Ok(_) if Instant::now() > deadline => return false,
            Ok(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

#[tokio::test]
async fn a_script_that_hangs_is_killed_with_what_it_started_and_reaped() {
    let mut s = Scripts::new();
    s.config.create_timeout = Duration::from_secs(2);
    s.write(
        "create",
        "echo $$ > \"$DIR/shell.pid\"\nsleep 300 &\necho $! > \"$DIR/sleep.pid\"\nwait",
    );
    let message = failed(s.provider().create(req()).await);
    assert!(message.contains("no answer within 2s; killed"), "{message}");
    let shell = s.read("shell.pid");
    // Reaped by the provider: no zombie left behind.
    assert!(
        !Path::new(&format!("/proc/{}", shell.trim())).exists(),
        "shell {shell} remains"
    );
    assert!(dead(s.read("sleep.pid").trim()), "its sleep survived");
}

#[tokio::test]
async fn huge_output_is_refused_without_waiting_for_the_timeout() {
    let mut s = Scripts::new();
    s.config.max_output_bytes = 1 << 20;
    s.config.timeout = Duration::from_secs(3600);
    s.write(
        "list",
        "while :; do echo '[{\"name\": \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}'; done",
    );
    let message = failed(s.provider().list("p").await);
    assert!(
        message.contains("printed more than 1048576 bytes on stdout"),
        "{message}"
    );
}

#[tokio::test]
async fn huge_stderr_is_cut_in_the_message() {
    let s = Scripts::new();
    s.write(
        "delete",
        "head -c 3000000 /dev/zero | tr '\\0' x >&2; echo ' the end' >&2; exit 2",
    );
    let message = failed(s.provider().delete("n1").await);
    assert!(message.len() < 2200, "{}", message.len());
    assert!(message.contains("exited with status 2: xxx"), "{message}");
}

#[tokio::test]
async fn delete_gets_the_name_and_67_means_not_found() {
    let s = Scripts::new();
    s.write("delete", "echo \"$1 $SLUICE_NODE_NAME\" > \"$DIR/deleted\"");
    s.provider().delete("p-a-bcdf").await.unwrap();
    assert_eq!(s.read("deleted"), "p-a-bcdf p-a-bcdf\n");
    s.write("delete", "exit 67");
    assert_eq!(
        s.provider().delete("p-a-bcdf").await,
        Err(ProviderError::NotFound("p-a-bcdf".into()))
    );
}

#[tokio::test]
async fn list_prints_the_pools_instances() {
    let s = Scripts::new();
    s.write(
        "list",
        r#"echo "[{\"name\":\"$1-a-bcdf\",\"pool\":\"$SLUICE_NODE_POOL\",\"zone\":\"zone-a\",\"state\":\"RUNNING\",\"createdAt\":\"2026-11-23T12:00:00Z\"}]""#,
    );
    let listed = s.provider().list("p").await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].name.as_str(), &listed[0].state),
        ("p-a-bcdf", &InstanceState::Running)
    );
    // An instance of another pool is a script bug, not something to act on.
    s.write(
        "list",
        r#"echo '[{"name":"x","pool":"other","zone":"z","state":"RUNNING","createdAt":"2026-11-23T12:00:00Z"}]'"#,
    );
    let message = failed(s.provider().list("p").await);
    assert!(
        message.contains("listed instance x of pool other, asked for pool p"),
        "{message}"
    );
    s.write("list", "echo '{}'");
    let message = failed(s.provider().list("p").await);
    assert!(
        message.contains("not a JSON array of instances"),
        "{message}"
    );
}

#[tokio::test]
async fn a_missing_script_cannot_start() {
    let s = Scripts::new();
    let message = failed(s.provider().list("p").await);
    assert!(
        message.contains("list script") && message.contains("cannot start it"),
        "{message}"
    );
}

#[tokio::test]
async fn capacity_is_the_optional_script_s_answer() {
    // spec: B1 — quota is asked before green is made.
    let s = Scripts::new();
    let p = s.provider();
    // No script: no known limit.
    assert_eq!(p.capacity().await, Ok(None));
    s.write("capacity", r#"echo '{"available": 7}'"#);
    assert_eq!(p.capacity().await, Ok(Some(7)));
    s.write("capacity", r#"echo '{"available": null}'"#);
    assert_eq!(p.capacity().await, Ok(None));
    s.write("capacity", r#"echo '{"free": 7}'"#);
    let e = failed(p.capacity().await);
    assert!(e.contains("capacity") && e.contains("available"), "{e}");
    s.write("capacity", "echo nope >&2; exit 3");
    let e = failed(p.capacity().await);
    assert!(e.contains("capacity") && e.contains("nope"), "{e}");
}
