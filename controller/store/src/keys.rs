//! Key ranges: what "under a prefix" and "after a key" mean in bytes.

/// The first key after every key that starts with `prefix` (etcd's
/// `range_end` for a prefix); `None` when no such key exists (an empty
/// prefix, or one of 0xff bytes only), meaning "to the end".
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// The smallest key greater than `key`.
pub fn key_after(key: &str) -> String {
    let mut k = String::with_capacity(key.len() + 1);
    k.push_str(key);
    k.push('\0');
    k
}

/// Where a list page starts: after `start_after` when that is under the
/// prefix or beyond it, else at the prefix itself.
pub fn page_start(prefix: &str, start_after: Option<&str>) -> String {
    match start_after {
        Some(after) if after >= prefix => key_after(after),
        _ => prefix.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_increments_the_last_byte_that_can_be() {
        assert_eq!(
            prefix_end(b"/registry/pods/"),
            Some(b"/registry/pods0".to_vec())
        );
        assert_eq!(prefix_end(b"a\xff\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff"), None);
        assert_eq!(prefix_end(b""), None);
    }

    #[test]
    fn page_start_never_goes_before_the_prefix() {
        assert_eq!(page_start("/p/", None), "/p/");
        assert_eq!(page_start("/p/", Some("/a")), "/p/");
        assert_eq!(page_start("/p/", Some("/p/x")), "/p/x\0");
    }
}
