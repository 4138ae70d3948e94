//! Where desired state comes from. Today a file the agent watches; the
//! controller's watch will implement the same trait.

use std::fs;
use std::path::{Path, PathBuf};

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
    /// Cheap to call often; returns a new state at most once per change.
    fn poll(&mut self) -> Update;
    fn describe(&self) -> String;
}

/// A YAML file of manifests, re-read whenever its content changes. Comparing
/// content rather than mtime catches editors that keep the mtime and quick
/// successive writes within one mtime tick.
pub struct FileSource {
    path: PathBuf,
    last: Option<Vec<u8>>,
}

impl FileSource {
    pub fn new(path: impl AsRef<Path>) -> Self {
        FileSource {
            path: path.as_ref().to_path_buf(),
            last: None,
        }
    }
}

impl StateSource for FileSource {
    fn poll(&mut self) -> Update {
        let bytes = match fs::read(&self.path) {
            Ok(b) => b,
            Err(e) => {
                let msg = format!("reading {}: {e}", self.path.display());
                // Report a missing file once per distinct failure, not every poll.
                let marker = msg.clone().into_bytes();
                if self.last.as_ref() == Some(&marker) {
                    return Update::Unchanged;
                }
                self.last = Some(marker);
                return Update::Rejected(msg);
            }
        };
        if self.last.as_ref() == Some(&bytes) {
            return Update::Unchanged;
        }
        let result = match std::str::from_utf8(&bytes) {
            Ok(text) => parse_state(text).map_err(|e: StateError| e.to_string()),
            Err(e) => Err(format!("not UTF-8: {e}")),
        };
        self.last = Some(bytes);
        match result {
            Ok(s) => Update::State(s),
            Err(e) => Update::Rejected(format!("{}: {e}", self.path.display())),
        }
    }

    fn describe(&self) -> String {
        format!("file {}", self.path.display())
    }
}
