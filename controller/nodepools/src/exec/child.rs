//! One run of a script: its input written, its output read within bounds,
//! its time bounded; a script past its time or its output bound is killed
//! with its whole process group (a shell's `sleep` too) and reaped.

use std::io;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

/// How much of stderr is kept for an error message.
const STDERR_KEPT: usize = 64 * 1024;

/// What to run.
pub(super) struct Call<'a> {
    pub program: &'a Path,
    pub args: &'a [&'a str],
    pub env: &'a [(&'a str, &'a str)],
    pub stdin: Vec<u8>,
    pub timeout: Duration,
    pub max_stdout: usize,
}

/// A script that ran to its end.
#[derive(Debug)]
pub(super) struct Finished {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    /// The first 64 KiB of it.
    pub stderr: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub(super) enum RunError {
    #[error("cannot start it: {0}")]
    Spawn(io::Error),
    #[error("no answer within {0:?}; killed")]
    TimedOut(Duration),
    #[error("printed more than {0} bytes on stdout; killed")]
    OutputTooLarge(usize),
    #[error("reading its output: {0}")]
    Io(io::Error),
}

pub(super) async fn run(call: Call<'_>) -> Result<Finished, RunError> {
    let mut command = Command::new(call.program);
    command
        .args(call.args)
        .envs(call.env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group, so that a timeout kills what it started too.
        .process_group(0)
        .kill_on_drop(true);
    let mut child = spawn(&mut command).await?;
    let group = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let max = call.max_stdout;
    let work = async {
        let write = async {
            if let Some(mut pipe) = stdin {
                // A script that does not read its input closes the pipe
                // early; that is its business, not an error.
                let _ = pipe.write_all(&call.stdin).await;
            }
            Ok::<_, RunError>(())
        };
        let (_, stdout, stderr) =
            tokio::try_join!(write, read_bounded(stdout, max), read_kept(stderr))?;
        let status = child.wait().await.map_err(RunError::Io)?;
        Ok(Finished {
            status,
            stdout,
            stderr,
        })
    };
    let result = match tokio::time::timeout(call.timeout, work).await {
        Ok(result) => result,
        Err(_) => Err(RunError::TimedOut(call.timeout)),
    };
    if result.is_err() {
        if let Some(group) = group {
            // ESRCH: the group is gone already.
            let _ = killpg(group, Signal::SIGKILL);
        }
        // Kills the script if it still runs, and reaps it.
        let _ = child.kill().await;
    }
    result
}

/// Spawn, retrying a few times on `ETXTBSY`: a script just written (by
/// its user, or by a test) can be held open for writing for a moment by a
/// process forked elsewhere that has not yet exec'd.
async fn spawn(command: &mut Command) -> Result<tokio::process::Child, RunError> {
    let mut tries = 0;
    loop {
        match command.spawn() {
            Err(e) if e.raw_os_error() == Some(Errno::ETXTBSY as i32) && tries < 5 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            result => return result.map_err(RunError::Spawn),
        }
    }
}

async fn read_bounded(
    pipe: Option<impl AsyncRead + Unpin>,
    max: usize,
) -> Result<Vec<u8>, RunError> {
    let mut buf = Vec::new();
    if let Some(pipe) = pipe {
        let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
        pipe.take(limit)
            .read_to_end(&mut buf)
            .await
            .map_err(RunError::Io)?;
    }
    if buf.len() > max {
        return Err(RunError::OutputTooLarge(max));
    }
    Ok(buf)
}

/// Keep the first 64 KiB; read (and drop) the rest so the script never
/// blocks on a full pipe.
async fn read_kept(pipe: Option<impl AsyncRead + Unpin>) -> Result<Vec<u8>, RunError> {
    let mut buf = Vec::new();
    if let Some(mut pipe) = pipe {
        (&mut pipe)
            .take(STDERR_KEPT as u64)
            .read_to_end(&mut buf)
            .await
            .map_err(RunError::Io)?;
        tokio::io::copy(&mut pipe, &mut tokio::io::sink())
            .await
            .map_err(RunError::Io)?;
    }
    Ok(buf)
}
