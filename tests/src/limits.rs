//! The test process's own limits, raised for tests that hold many sockets.

/// Raise the soft `RLIMIT_NOFILE` to the hard one; panics when even that
/// is not above `needed` descriptors (a flood test holds both ends of its
/// connections in this process).
pub fn raise_nofile_limit(needed: usize) {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is valid and writable for the call.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) }, 0);
    r.rlim_cur = r.rlim_max;
    // SAFETY: `r` is a valid rlimit; the call only reads it.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) }, 0);
    assert!(
        r.rlim_cur as usize > needed,
        "hard RLIMIT_NOFILE {} too low for {needed} descriptors",
        r.rlim_max
    );
}
