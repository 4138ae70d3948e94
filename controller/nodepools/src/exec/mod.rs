//! The exec provider: the user's three scripts make, remove and list VMs
//! (or anything else that runs a node agent). `docs/node-providers.md`
//! holds the same contract for script writers.
//!
//! - **create** gets the [`CreateNode`] request as JSON on stdin and the
//!   environment variables `SLUICE_NODE_NAME`, `SLUICE_NODE_ZONE`,
//!   `SLUICE_NODE_POOL` and `SLUICE_NODE_VERSION`. On success it prints
//!   one JSON [`Instance`] (the one named `SLUICE_NODE_NAME`, of that
//!   pool) on stdout and exits 0. Out of quota, it exits 75 (`EX_TEMPFAIL`)
//!   and prints `{"quota": {"resource": "CPUS", "limit": 24}}`. Any other
//!   exit is a failure, its stderr the message. A node with a run limit
//!   (GKE's `maxRunDuration`; every flex-start or queued-provisioning
//!   pool's node has one) also gets `SLUICE_NODE_MAX_RUN_DURATION`
//!   (`3600s`, GKE's form; empty without a limit), the same value as its
//!   config's `sluice.dev/max-run-duration` label: the script (or the
//!   machine) ends the machine itself once that long has passed since
//!   the `createdAt` it printed, as GKE ends a flex-start VM, and `list`
//!   stops returning it (or returns it `DELETING`). The pool loop then
//!   makes a new node if the pool still wants one.
//! - **delete** gets the instance's name as its argument and in
//!   `SLUICE_NODE_NAME`; exit 0 once the instance is gone or going, 67
//!   (`EX_NOUSER`) when there is no such instance.
//! - **list** gets the pool's name as its argument and in
//!   `SLUICE_NODE_POOL`, and prints a JSON array of the pool's instances.
//!
//! Every call is bounded in time (create: 10 min, delete and list: 60 s by
//! default; on timeout the script and its process group are killed and
//! reaped) and in output (4 MiB of stdout by default; more is refused).
//! Output that does not parse is an error naming the script and what was
//! wrong, never a panic. Scripts inherit the controller's environment.

mod child;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::instance::{CreateNode, Instance};
use crate::provider::{NodeProvider, ProviderError, ProviderFuture};
use child::{Call, Finished};

/// `EX_TEMPFAIL`: the create script is out of quota.
pub const EXIT_QUOTA: i32 = 75;
/// `EX_NOUSER`: the delete script found no such instance.
pub const EXIT_NOT_FOUND: i32 = 67;

/// Where the scripts are and how far they are trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecConfig {
    pub create: PathBuf,
    pub delete: PathBuf,
    pub list: PathBuf,
    /// Optional: how many more machines can be made (`capacity`); absent
    /// file: no known limit.
    pub capacity: PathBuf,
    pub create_timeout: Duration,
    /// For delete and list.
    pub timeout: Duration,
    /// The most stdout a script may print (a list of 5 000 instances is
    /// about 1 MiB).
    pub max_output_bytes: usize,
}

impl ExecConfig {
    /// The scripts `create`, `delete` and `list` in `dir`, with the
    /// default bounds.
    pub fn in_dir(dir: impl Into<PathBuf>) -> ExecConfig {
        let dir = dir.into();
        ExecConfig {
            create: dir.join("create"),
            delete: dir.join("delete"),
            list: dir.join("list"),
            capacity: dir.join("capacity"),
            create_timeout: Duration::from_secs(600),
            timeout: Duration::from_secs(60),
            max_output_bytes: 4 << 20,
        }
    }
}

/// The provider running [`ExecConfig`]'s scripts.
#[derive(Debug, Clone)]
pub struct ExecProvider {
    config: ExecConfig,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QuotaReport {
    quota: Quota,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Quota {
    resource: String,
    limit: u64,
}

impl ExecProvider {
    pub fn new(config: ExecConfig) -> Self {
        ExecProvider { config }
    }

    async fn create_now(&self, req: CreateNode) -> Result<Instance, ProviderError> {
        let script = Script::new("create", &self.config.create);
        let stdin = serde_json::to_vec(&req).map_err(|e| script.fail(e))?;
        // Always set, empty without a limit, so that a value in the
        // controller's own environment never reaches the script.
        let run = req
            .config
            .max_run_duration()
            .map(|d| d.to_string())
            .unwrap_or_default();
        let env = [
            ("SLUICE_NODE_NAME", req.name.as_str()),
            ("SLUICE_NODE_ZONE", req.zone.as_str()),
            ("SLUICE_NODE_POOL", req.pool.as_str()),
            ("SLUICE_NODE_VERSION", req.version.as_str()),
            ("SLUICE_NODE_MAX_RUN_DURATION", run.as_str()),
        ];
        let done = script
            .run(
                &[],
                &env,
                stdin,
                self.config.create_timeout,
                self.config.max_output_bytes,
            )
            .await?;
        match done.status.code() {
            Some(0) => {
                let instance: Instance = script.parse(&done.stdout, "one JSON instance")?;
                if instance.name != req.name || instance.pool != req.pool {
                    return Err(script.fail(format!(
                        "printed instance {} of pool {}, asked for {} of pool {}",
                        instance.name, instance.pool, req.name, req.pool
                    )));
                }
                Ok(instance)
            }
            Some(EXIT_QUOTA) => {
                let report: QuotaReport = script.parse(
                    &done.stdout,
                    r#"{"quota": {"resource": ..., "limit": ...}} after exit 75"#,
                )?;
                Err(ProviderError::QuotaExhausted {
                    resource: report.quota.resource,
                    limit: report.quota.limit,
                })
            }
            _ => Err(script.exit_error(&done)),
        }
    }

    /// Run delete or list: `value` as the argument and in `var`, no input.
    async fn run_with_arg(
        &self,
        script: &Script<'_>,
        var: &str,
        value: &str,
    ) -> Result<Finished, ProviderError> {
        let timeout = self.config.timeout;
        let env = [(var, value)];
        script
            .run(
                &[value],
                &env,
                Vec::new(),
                timeout,
                self.config.max_output_bytes,
            )
            .await
    }

    async fn delete_now(&self, name: &str) -> Result<(), ProviderError> {
        let script = Script::new("delete", &self.config.delete);
        let done = self.run_with_arg(&script, "SLUICE_NODE_NAME", name).await?;
        match done.status.code() {
            Some(0) => Ok(()),
            Some(EXIT_NOT_FOUND) => Err(ProviderError::NotFound(name.to_owned())),
            _ => Err(script.exit_error(&done)),
        }
    }

    async fn list_now(&self, pool: &str) -> Result<Vec<Instance>, ProviderError> {
        let script = Script::new("list", &self.config.list);
        let done = self.run_with_arg(&script, "SLUICE_NODE_POOL", pool).await?;
        if done.status.code() != Some(0) {
            return Err(script.exit_error(&done));
        }
        let instances: Vec<Instance> = script.parse(&done.stdout, "a JSON array of instances")?;
        if let Some(stray) = instances.iter().find(|i| i.pool != pool) {
            return Err(script.fail(format!(
                "listed instance {} of pool {}, asked for pool {pool}",
                stray.name, stray.pool
            )));
        }
        Ok(instances)
    }
}

/// One of the three scripts, for running it and naming it in errors.
struct Script<'a> {
    role: &'static str,
    path: &'a std::path::Path,
}

impl<'a> Script<'a> {
    fn new(role: &'static str, path: &'a std::path::Path) -> Self {
        Script { role, path }
    }

    fn fail(&self, what: impl std::fmt::Display) -> ProviderError {
        ProviderError::Failed(format!(
            "{} script {}: {what}",
            self.role,
            self.path.display()
        ))
    }

    async fn run(
        &self,
        args: &[&str],
        env: &[(&str, &str)],
        stdin: Vec<u8>,
        timeout: Duration,
        max_stdout: usize,
    ) -> Result<Finished, ProviderError> {
        child::run(Call {
            program: self.path,
            args,
            env,
            stdin,
            timeout,
            max_stdout,
        })
        .await
        .map_err(|e| self.fail(e))
    }

    fn parse<T: serde::de::DeserializeOwned>(
        &self,
        stdout: &[u8],
        expected: &str,
    ) -> Result<T, ProviderError> {
        let text = String::from_utf8_lossy(stdout);
        serde_json::from_str(text.trim()).map_err(|e| {
            self.fail(format_args!(
                "stdout is not {expected}: {e}; it began {:?}",
                head(&text)
            ))
        })
    }

    fn exit_error(&self, done: &Finished) -> ProviderError {
        let how = match done.status.code() {
            Some(code) => format!("exited with status {code}"),
            None => "was killed by a signal".to_owned(),
        };
        let stderr = String::from_utf8_lossy(&done.stderr);
        let stderr = stderr.trim();
        if stderr.is_empty() {
            self.fail(format_args!("{how}, saying nothing on stderr"))
        } else {
            self.fail(format_args!("{how}: {}", tail(stderr)))
        }
    }
}

/// The first 80 characters, to show what was printed.
fn head(text: &str) -> String {
    text.chars().take(80).collect()
}

/// The last 2 000 characters of stderr: where the error usually is.
fn tail(text: &str) -> &str {
    let n = text.chars().count();
    match text.char_indices().nth(n.saturating_sub(2000)) {
        Some((at, _)) if n > 2000 => &text[at..],
        _ => text,
    }
}

/// What the `capacity` script prints.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CapacityReport {
    /// Machines that can still be made; `null`: no known limit.
    available: Option<u64>,
}

impl ExecProvider {
    async fn capacity_now(&self) -> Result<Option<u64>, ProviderError> {
        if !self.config.capacity.exists() {
            return Ok(None);
        }
        let script = Script::new("capacity", &self.config.capacity);
        let done = script
            .run(
                &[],
                &[],
                Vec::new(),
                self.config.timeout,
                self.config.max_output_bytes,
            )
            .await?;
        if done.status.code() != Some(0) {
            return Err(script.exit_error(&done));
        }
        let report: CapacityReport =
            script.parse(&done.stdout, r#"a JSON object {"available": N or null}"#)?;
        Ok(report.available)
    }
}

impl NodeProvider for ExecProvider {
    fn capacity(&self) -> ProviderFuture<'_, Option<u64>> {
        Box::pin(self.capacity_now())
    }

    fn create(&self, req: CreateNode) -> ProviderFuture<'_, Instance> {
        Box::pin(self.create_now(req))
    }

    fn delete<'a>(&'a self, name: &'a str) -> ProviderFuture<'a, ()> {
        Box::pin(self.delete_now(name))
    }

    fn list<'a>(&'a self, pool: &'a str) -> ProviderFuture<'a, Vec<Instance>> {
        Box::pin(self.list_now(pool))
    }
}
