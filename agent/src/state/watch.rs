//! The state file, watched from a thread of its own: inotify says when the
//! file may have changed, a slow `stat` poll covers what inotify cannot see,
//! and reading and parsing happen here, never in the sync loop, so a huge
//! or hostile file never holds up a sync or a health answer.

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::eventfd::EventFd;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use tracing::warn;

use super::source::{FileSource, StateSource, Update};

/// With inotify watching, the `stat` poll only covers what it misses (a
/// file bind-mounted over, a watch lost): every few seconds costs nothing.
const STAT_POLL_WATCHED: Duration = Duration::from_secs(2);
/// Without inotify (no instances left, a file system that has none).
const STAT_POLL_UNWATCHED: Duration = Duration::from_secs(1);
/// A file that just changed is read again this soon, until its timestamps
/// can be trusted (see `FileSource::unsettled`).
const UNSETTLED_RECHECK: Duration = Duration::from_millis(250);
/// Writers that truncate and then write, or write in pieces, produce a
/// burst of events: read once the directory has been quiet this long...
const SETTLE: Duration = Duration::from_millis(50);
/// ...but no later than this after the burst began, so a file rewritten
/// without pause is still read.
const SETTLE_MAX: Duration = Duration::from_secs(1);

/// Shared with the worker: since when it has been reading or parsing.
type Busy = Arc<Mutex<Option<Instant>>>;

pub struct WatchedFile {
    path: PathBuf,
    results: Receiver<Update>,
    reads: Arc<AtomicU64>,
    busy: Busy,
    stop: Arc<AtomicBool>,
    wake: Arc<EventFd>,
    worker: Option<JoinHandle<()>>,
}

impl WatchedFile {
    pub fn new(path: impl AsRef<Path>) -> std::io::Result<Self> {
        let path = path.as_ref().to_path_buf();
        let (tx, results) = mpsc::channel();
        let busy: Busy = Arc::new(Mutex::new(None));
        let stop = Arc::new(AtomicBool::new(false));
        let reads = Arc::new(AtomicU64::new(0));
        let wake = Arc::new(EventFd::new().map_err(std::io::Error::from)?);
        let worker = Worker {
            source: FileSource::new(&path),
            tx,
            busy: busy.clone(),
            stop: stop.clone(),
            wake: wake.clone(),
            reads: reads.clone(),
            writing: None,
        };
        let handle = std::thread::Builder::new()
            .name("state-watch".into())
            .spawn(move || worker.run())?;
        Ok(WatchedFile {
            path,
            results,
            reads,
            busy,
            stop,
            wake,
            worker: Some(handle),
        })
    }
}

impl WatchedFile {
    /// How many times the file has been read whole: an unchanged file is
    /// never read again, whatever its size.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }
}

impl StateSource for WatchedFile {
    fn poll(&mut self) -> Update {
        // Only the newest result matters: it is what the file holds now.
        let mut last = Update::Unchanged;
        while let Ok(u) = self.results.try_recv() {
            last = u;
        }
        last
    }

    fn describe(&self) -> String {
        format!("file {} (watched)", self.path.display())
    }

    fn busy_since(&self) -> Option<Instant> {
        *self.busy.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for WatchedFile {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.wake.write(1);
        if let Some(h) = self.worker.take() {
            let _ = h.join();
        }
    }
}

struct Worker {
    source: FileSource,
    tx: Sender<Update>,
    busy: Busy,
    stop: Arc<AtomicBool>,
    wake: Arc<EventFd>,
    reads: Arc<AtomicU64>,
    /// Since when the file has been open for writing (modified or created,
    /// not yet closed): a file being written is not read, so a half-written
    /// file never reaches validation, let alone the datapath.
    writing: Option<Instant>,
}

/// How long a file may stay open for writing before it is read anyway (a
/// writer that never closes must not freeze the state forever).
const WRITE_MAX: Duration = Duration::from_secs(5);

impl Worker {
    fn run(mut self) {
        let notify = self.watch_dir();
        loop {
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            let writing = self.writing.filter(|t| t.elapsed() < WRITE_MAX);
            if writing.is_none() && self.source.may_have_changed() {
                self.writing = None;
                self.set_busy(Some(Instant::now()));
                let update = self.source.check();
                self.set_busy(None);
                self.reads.store(self.source.reads(), Ordering::Relaxed);
                if !matches!(update, Update::Unchanged) && self.tx.send(update).is_err() {
                    return;
                }
            }
            let wait = if let Some(t) = writing {
                WRITE_MAX.saturating_sub(t.elapsed())
            } else if self.source.unsettled() {
                UNSETTLED_RECHECK
            } else if notify.is_some() {
                STAT_POLL_WATCHED
            } else {
                STAT_POLL_UNWATCHED
            };
            if self.wait(notify.as_ref(), wait) {
                self.settle(notify.as_ref());
            }
        }
    }

    /// Watch the file's directory rather than the file: editors and config
    /// tools replace files by rename, and Kubernetes volumes swap a
    /// symlinked directory, neither of which a watch on the file would see.
    fn watch_dir(&self) -> Option<Inotify> {
        let dir = match self.source.path().parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let notify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .map_err(|e| warn!(error = %e, "inotify unavailable; polling the state file"))
            .ok()?;
        let mask = AddWatchFlags::IN_CLOSE_WRITE
            | AddWatchFlags::IN_MODIFY
            | AddWatchFlags::IN_ATTRIB
            | AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_DELETE
            | AddWatchFlags::IN_MOVED_FROM
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_DELETE_SELF
            | AddWatchFlags::IN_MOVE_SELF;
        match notify.add_watch(&dir, mask) {
            Ok(_) => Some(notify),
            Err(e) => {
                warn!(dir = %dir.display(), error = %e,
                      "cannot watch the state file's directory; polling it");
                None
            }
        }
    }

    fn set_busy(&self, v: Option<Instant>) {
        *self.busy.lock().unwrap_or_else(|p| p.into_inner()) = v;
    }

    /// Wait up to `timeout`; true when inotify reported something.
    fn wait(&mut self, notify: Option<&Inotify>, timeout: Duration) -> bool {
        let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
        let wake = self.wake.as_fd();
        let mut fds = vec![PollFd::new(wake, PollFlags::POLLIN)];
        if let Some(n) = notify {
            fds.push(PollFd::new(n.as_fd(), PollFlags::POLLIN));
        }
        if poll(&mut fds, PollTimeout::from(ms)).is_err() {
            return false;
        }
        let ready = |fd: &PollFd| fd.revents().is_some_and(|r| !r.is_empty());
        if !fds.get(1).is_some_and(ready) {
            return false;
        }
        self.drain(notify)
    }

    /// Wait for a burst of events to end (bounded), so a file being written
    /// is read once, whole.
    fn settle(&mut self, notify: Option<&Inotify>) {
        let began = Instant::now();
        while began.elapsed() < SETTLE_MAX && !self.stop.load(Ordering::Acquire) {
            if !self.wait(notify, SETTLE) {
                return;
            }
        }
    }

    /// Read every queued event, following whether our file is open for
    /// writing; true if there was any event.
    fn drain(&mut self, notify: Option<&Inotify>) -> bool {
        let Some(n) = notify else { return false };
        let name = self.source.path().file_name().map(|s| s.to_os_string());
        let mut any = false;
        while let Ok(events) = n.read_events() {
            if events.is_empty() {
                break;
            }
            any = true;
            for e in events {
                if e.name.is_none() || e.name != name {
                    continue;
                }
                self.writing = next_writing(self.writing, e.mask, Instant::now());
            }
        }
        any
    }
}

/// Whether the file is still being written after an event on it: created
/// or modified opens a write, closed after writing, renamed into place or
/// removed ends it.
fn next_writing(writing: Option<Instant>, mask: AddWatchFlags, now: Instant) -> Option<Instant> {
    let ends = AddWatchFlags::IN_CLOSE_WRITE
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_MOVED_FROM
        | AddWatchFlags::IN_DELETE;
    if mask.intersects(ends) {
        None
    } else if mask.intersects(AddWatchFlags::IN_MODIFY | AddWatchFlags::IN_CREATE) {
        writing.or(Some(now))
    } else {
        writing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Dir(PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    fn dir(tag: &str) -> Dir {
        let p = std::env::temp_dir().join(format!("sluice-watch-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("mkdir");
        Dir(p)
    }

    /// A watched file holding `text`, its first state taken.
    fn started(tag: &str, text: &str) -> (Dir, PathBuf, WatchedFile) {
        let d = dir(tag);
        let path = d.0.join("state.yaml");
        std::fs::write(&path, text).expect("write");
        let mut w = WatchedFile::new(&path).expect("watch");
        assert!(matches!(next(&mut w), Some(Update::State(_))));
        (d, path, w)
    }

    /// Poll until something other than `Unchanged` arrives (bounded).
    fn next(w: &mut WatchedFile) -> Option<Update> {
        for _ in 0..200 {
            match w.poll() {
                Update::Unchanged => std::thread::sleep(Duration::from_millis(25)),
                u => return Some(u),
            }
        }
        None
    }

    #[test]
    fn a_file_open_for_writing_is_not_read_until_closed() {
        use std::io::Write;
        let (_dir, path, mut w) = started("open", NODE);
        // Truncate, write half a document, pause: nothing is read.
        let mut f = std::fs::File::create(&path).expect("open");
        f.write_all(b"kind: Node\napiVersion: v1\nmeta")
            .expect("write");
        f.flush().expect("flush");
        std::thread::sleep(Duration::from_millis(1500));
        assert!(
            matches!(w.poll(), Update::Unchanged),
            "half a file was read"
        );
        f.write_all(b"data: {name: m}\n").expect("write");
        drop(f);
        match next(&mut w) {
            Some(Update::State(s)) => assert!(s.nodes.contains_key("m")),
            other => panic!("expected the whole file's state, got {other:?}"),
        }
    }

    #[test]
    fn writes_open_with_create_or_modify_and_end_with_close_rename_or_delete() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(1);
        let w = next_writing(None, AddWatchFlags::IN_CREATE, t0);
        assert_eq!(w, Some(t0));
        // Later modifications keep the first moment.
        assert_eq!(next_writing(w, AddWatchFlags::IN_MODIFY, t1), Some(t0));
        assert_eq!(next_writing(w, AddWatchFlags::IN_ATTRIB, t1), Some(t0));
        for end in [
            AddWatchFlags::IN_CLOSE_WRITE,
            AddWatchFlags::IN_MOVED_TO,
            AddWatchFlags::IN_DELETE,
        ] {
            assert_eq!(next_writing(w, end, t1), None);
        }
    }

    #[test]
    fn an_unchanged_large_file_is_not_read_again() {
        // Issue 8: a 50 MB file re-read every 200 ms kept the agent at 40 %
        // of a core. Now an unchanged file costs a stat every few seconds.
        let filler = format!("# {}\n", "x".repeat(1021)).repeat(8 * 1024);
        let (_dir, _path, mut w) = started("large", &format!("{NODE}{filler}"));
        // Past the coarse-timestamp window (re-reads while it lasts).
        std::thread::sleep(Duration::from_millis(1500));
        let settled = w.reads();
        // Longer than two stat polls.
        std::thread::sleep(STAT_POLL_WATCHED * 2 + Duration::from_millis(500));
        assert_eq!(w.reads(), settled, "an unchanged file was read again");
        assert!(matches!(w.poll(), Update::Unchanged));
    }

    const NODE: &str = "kind: Node\napiVersion: v1\nmetadata: {name: n}\n";

    #[test]
    fn a_new_version_arrives_and_a_missing_file_is_reported_once() {
        let (d, path, mut w) = started("arrive", NODE);
        std::fs::remove_file(&path).expect("rm");
        match next(&mut w) {
            Some(Update::Rejected(e)) => assert!(e.contains("state.yaml"), "{e}"),
            other => panic!("expected a rejection, got {other:?}"),
        }
        // Replaced by rename, as editors and config tools do.
        let tmp = d.0.join(".state.yaml.tmp");
        std::fs::write(&tmp, NODE.replace("name: n", "name: m")).expect("write");
        std::fs::rename(&tmp, &path).expect("rename");
        match next(&mut w) {
            Some(Update::State(s)) => assert!(s.nodes.contains_key("m")),
            other => panic!("expected the renamed file's state, got {other:?}"),
        }
    }
}
