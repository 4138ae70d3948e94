//! The request line of a read: the path as the router resolves it, and a
//! list's `labelSelector`, `fieldSelector` and `continue` token, parsed
//! and matched against an object.
//!
//! Input: NUL-separated path, label selector, field selector, continue
//! token and object (JSON); missing parts are empty.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use sluice_apiserver::fuzzing;
use sluice_apiserver::path::resolve;
use sluice_controller_fuzz::{check_error, split_nul};

fuzz_target!(|data: &[u8]| {
    let (path, rest) = split_nul(data);
    let (labels, rest) = split_nul(rest);
    let (fields, rest) = split_nul(rest);
    let (token, obj) = split_nul(rest);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let _ = resolve(&text(path));
    let obj: Value = serde_json::from_slice(obj).unwrap_or(Value::Null);
    if let Err(e) = fuzzing::list_query(&text(labels), &text(fields), &text(token), &obj) {
        check_error(&e, data);
    }
});
