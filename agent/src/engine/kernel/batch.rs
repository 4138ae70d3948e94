//! `BPF_MAP_UPDATE_BATCH` on arrays (aya 0.14 has no batch operations):
//! one system call writes a whole window instead of one call per slot.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// `enum bpf_cmd`: `BPF_MAP_UPDATE_BATCH` (Linux 5.6).
const BPF_MAP_UPDATE_BATCH: libc::c_long = 26;

/// The `batch` member of `union bpf_attr` (`linux/bpf.h`).
#[repr(C)]
#[derive(Default)]
struct BatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

/// Whether an error means "this kernel has no batch operations for the
/// map" (then the caller writes slot by slot).
pub fn unsupported(e: &io::Error) -> bool {
    // ENOTSUPP (524) is the kernel-internal code some map types return.
    matches!(
        e.raw_os_error(),
        Some(libc::EINVAL) | Some(libc::EOPNOTSUPP) | Some(524)
    )
}

/// Write `values` at indices `start ..` of the array `fd`. `V` must be the
/// map's value type, byte for byte (`#[repr(C)]`, `value_size` bytes).
pub fn update_array<V: Copy>(fd: BorrowedFd<'_>, start: u32, values: &[V]) -> io::Result<()> {
    let count = u32::try_from(values.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "batch too large"))?;
    if count == 0 {
        return Ok(());
    }
    let last = start
        .checked_add(count - 1)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "indices past u32"))?;
    let keys: Vec<u32> = (start..=last).collect();
    let mut attr = BatchAttr {
        keys: keys.as_ptr() as u64,
        values: values.as_ptr() as u64,
        count,
        map_fd: fd.as_raw_fd() as u32,
        ..Default::default()
    };
    // SAFETY: `attr` is the kernel's `batch` layout; `keys` and `values`
    // hold `count` elements each and outlive the call; the kernel only
    // reads them (and writes `attr.count`).
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_MAP_UPDATE_BATCH,
            &mut attr as *mut BatchAttr,
            std::mem::size_of::<BatchAttr>() as u32,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    if attr.count != count {
        return Err(io::Error::other(format!(
            "the kernel wrote {} of {count} elements",
            attr.count
        )));
    }
    Ok(())
}
