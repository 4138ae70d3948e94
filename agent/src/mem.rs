//! Giving memory back after a large state is replaced.
//!
//! glibc's malloc keeps freed pages of its heaps (one per thread that
//! allocated: the state watcher parses in its own) until the top of a heap
//! is free, so an agent that once held 10 000 Services keeps that high-water
//! mark after the state shrinks. `malloc_trim` returns every whole free
//! page of every arena to the kernel.

/// Return free heap pages to the kernel; a no-op where malloc is not glibc's.
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists under
    // its locks; it takes no pointers from us.
    unsafe {
        libc::malloc_trim(0);
    }
}
