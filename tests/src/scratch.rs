//! A test's scratch directory, removed when its guard drops (also when
//! the test fails), named per process and per guard so tests running at
//! once never share one.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// `$TMPDIR/sluice-<tag>-<pid>-<n>`, created empty; gone on drop.
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    pub fn new(tag: &str) -> ScratchDir {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("sluice-{tag}-{}-{n}", std::process::id()));
        // A leftover of an earlier process with the same pid would hold
        // files this test did not write.
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        ScratchDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `text` to `name` in the directory; its path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap_or_else(|e| panic!("writing {}: {e}", p.display()));
        p
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_directory_goes_with_its_guard_even_on_panic() {
        let kept = std::panic::catch_unwind(|| {
            let d = ScratchDir::new("scratch-test");
            let p = d.write("a.yaml", "x: 1");
            assert!(p.exists());
            let dir = d.path().to_path_buf();
            std::panic::panic_any(dir)
        });
        let dir = kept
            .expect_err("panicked")
            .downcast::<PathBuf>()
            .expect("the path");
        assert!(!dir.exists(), "{} left behind", dir.display());
    }
}
