//! Where desired state comes from. Today a file the agent watches
//! ([`super::watch::WatchedFile`] in the agent, [`FileSource`] where a
//! caller wants each poll to look at the file itself), or the API server
//! ([`super::api::KubeSource`], `--kubeconfig`).

use std::fs::{self, File};
use std::hash::Hasher;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use super::limits::{check_size, MAX_STATE_BYTES};
use super::{parse_state, DesiredState, StateError};

/// One poll of a source.
#[derive(Debug)]
pub enum Update {
    /// Nothing new since the last poll.
    Unchanged,
    /// A new, fully validated state.
    State(DesiredState),
    /// A new version that was rejected; the caller keeps what it runs.
    Rejected(String),
}

pub trait StateSource: Send {
    /// Cheap to call often, never blocks on reading or parsing; returns a
    /// new state at most once per change.
    fn poll(&mut self) -> Update;
    fn describe(&self) -> String;
    /// Since when a change has been seen and is still being read or
    /// validated (the sync loop counts it as a queued update, so a parse
    /// that never ends turns `/healthz` unhealthy).
    fn busy_since(&self) -> Option<Instant> {
        None
    }

    /// Notified when an update is ready to be polled, for a sync loop that
    /// would rather not wait for its next poll (`None`: poll only).
    fn waker(&self) -> Option<std::sync::Arc<tokio::sync::Notify>> {
        None
    }
}

/// What identifies a version of the file without reading it. `ctime`
/// changes with every write and cannot be set by the writer, so an editor
/// that restores the mtime is still seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fingerprint {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl Fingerprint {
    fn of(m: &fs::Metadata) -> Self {
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Fingerprint {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: ns(m.mtime(), m.mtime_nsec()),
            ctime_ns: ns(m.ctime(), m.ctime_nsec()),
        }
    }

    /// Timestamps come from a coarse clock (a jiffy or more), so two writes
    /// of the same size within one tick look alike. A version changed this
    /// recently is read again on the next check rather than trusted.
    fn is_recent(&self, now: SystemTime) -> bool {
        const COARSE: Duration = Duration::from_secs(1);
        let now_ns = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128);
        now_ns - self.ctime_ns < COARSE.as_nanos() as i128
    }
}

/// How the last check ended, so unchanged input costs one `stat`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Nothing,
    /// The file's content, by length and hash; its fingerprint once stable.
    Content {
        len: u64,
        hash: u64,
        stable: Option<Fingerprint>,
    },
    /// The file could not be read (missing, unreadable): this message.
    Failed(String),
}

/// A YAML file of manifests, checked on every [`FileSource::poll`]: a
/// `stat`, and a read only when the file changed. Reading and parsing run in
/// the caller's thread; the agent's sync loop uses
/// [`super::watch::WatchedFile`], which runs this off the loop.
pub struct FileSource {
    path: PathBuf,
    seen: Seen,
    reads: u64,
}

impl FileSource {
    pub fn new(path: impl AsRef<Path>) -> Self {
        FileSource {
            path: path.as_ref().to_path_buf(),
            seen: Seen::Nothing,
            reads: 0,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many times the file has been read whole (tests, metrics).
    pub fn reads(&self) -> u64 {
        self.reads
    }

    /// Whether the last version read changed too recently to trust its
    /// timestamps (see [`Fingerprint::is_recent`]): check again soon.
    pub fn unsettled(&self) -> bool {
        matches!(self.seen, Seen::Content { stable: None, .. })
    }

    /// Without reading: could the file differ from what was last seen?
    pub fn may_have_changed(&self) -> bool {
        match (&self.seen, fs::metadata(&self.path)) {
            (
                Seen::Content {
                    stable: Some(f), ..
                },
                Ok(m),
            ) => Fingerprint::of(&m) != *f,
            (Seen::Failed(_), Err(_)) => false,
            _ => true,
        }
    }

    fn fail(&mut self, msg: String) -> Update {
        // A missing file is reported once per distinct failure, not every poll.
        if self.seen == Seen::Failed(msg.clone()) {
            return Update::Unchanged;
        }
        self.seen = Seen::Failed(msg.clone());
        Update::Rejected(msg)
    }

    /// Read the file if it may have changed; parse it if its content did.
    pub fn check(&mut self) -> Update {
        let shown = self.path.display().to_string();
        if !self.may_have_changed() {
            return Update::Unchanged;
        }
        let before = match fs::metadata(&self.path) {
            Ok(m) => m,
            Err(e) => return self.fail(format!("reading {shown}: {e}")),
        };
        if let Err(e) = check_size(before.len()) {
            return self.fail(format!("{shown}: {e}"));
        }
        let bytes = match read_bounded(&self.path) {
            Ok(b) => b,
            Err(e) => return self.fail(format!("reading {shown}: {e}")),
        };
        self.reads += 1;
        let fp = Fingerprint::of(&before);
        // Written while being read: the next check sees the rest.
        let moved = fs::metadata(&self.path).map_or(true, |m| Fingerprint::of(&m) != fp);
        let stable = (!moved && !fp.is_recent(SystemTime::now())).then_some(fp);
        let (len, hash) = (bytes.len() as u64, content_hash(&bytes));
        if let Seen::Content {
            len: l, hash: h, ..
        } = self.seen
        {
            if (l, h) == (len, hash) {
                self.seen = Seen::Content { len, hash, stable };
                return Update::Unchanged;
            }
        }
        self.seen = Seen::Content { len, hash, stable };
        let result = match std::str::from_utf8(&bytes) {
            Ok(text) => parse_state(text).map_err(|e: StateError| e.to_string()),
            Err(e) => Err(format!("not UTF-8: {e}")),
        };
        match result {
            Ok(s) => Update::State(s),
            Err(e) => Update::Rejected(format!("{shown}: {e}")),
        }
    }
}

impl StateSource for FileSource {
    fn poll(&mut self) -> Update {
        self.check()
    }

    fn describe(&self) -> String {
        format!("file {}", self.path.display())
    }
}

/// Read at most [`MAX_STATE_BYTES`] + 1, so a file that grows between the
/// size check and the read is still refused rather than read whole.
fn read_bounded(path: &Path) -> std::io::Result<Vec<u8>> {
    let f = File::open(path)?;
    let mut bytes = Vec::new();
    f.take(MAX_STATE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_STATE_BYTES {
        return Err(std::io::Error::other(format!(
            "grew past {MAX_STATE_BYTES} bytes while being read"
        )));
    }
    Ok(bytes)
}

/// Compares versions without keeping a copy of the file (which can be tens
/// of megabytes). SipHash with a fixed key: a change goes unseen only on a
/// 64-bit collision of two versions of the same file.
fn content_hash(bytes: &[u8]) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    h.write(bytes);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_over_the_limit_is_refused_without_reading_it() {
        let dir = std::env::temp_dir().join(format!("sluice-source-{}-big", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let path = dir.join("state.yaml");
        // Sparse: no 64 MiB written to disk.
        let f = File::create(&path).expect("create");
        f.set_len(MAX_STATE_BYTES + 1).expect("grow");
        let mut s = FileSource::new(&path);
        let got = s.check();
        let _ = std::fs::remove_dir_all(&dir);
        match got {
            Update::Rejected(e) => {
                assert!(e.contains(&(MAX_STATE_BYTES + 1).to_string()), "{e}");
                assert!(e.contains("at most"), "{e}");
            }
            other => panic!("expected a rejection, got {other:?}"),
        }
        assert_eq!(s.reads(), 0);
    }
}
