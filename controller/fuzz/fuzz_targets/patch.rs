//! The patch code: JSON merge, strategic merge, JSON patch and server-side
//! apply on a live object, then the update's checks (metadata, status,
//! `fieldValidation`) into the object the server would store.
//!
//! Input: byte 0 picks the resource (bits 0-6) and whether the request
//! says `force=true` (bit 7); byte 1 the format (bits 0-2), the
//! `fieldValidation` mode (bits 3-5), the `/status` subresource (bit 6)
//! and whether a field manager is sent (bit 7); then the
//! live object as created (JSON), a NUL byte, and the patch body. The live
//! object goes through the create path first, so it is one the server
//! could have stored; inputs whose live object would not be accepted are
//! skipped (the decode target covers those).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use sluice_apiserver::fuzzing;
use sluice_controller_fuzz::{check_error, check_stored, collection, split_nul, MODES};

const CTYPES: &[&str] = &[
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/json-patch+json",
    "application/apply-patch+yaml",
    "application/apply-patch+json",
    "text/plain",
];

fuzz_target!(|data: &[u8]| {
    let [r, m, rest @ ..] = data else {
        return;
    };
    let (live, body) = split_nul(rest);
    let collection = collection(*r & 0x7f);
    let force = *r & 0x80 != 0;
    let Ok(live) = fuzzing::create(&collection, "application/json", "Ignore", live) else {
        return;
    };
    let name = live
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let ctype = CTYPES[usize::from(*m & 0x07) % CTYPES.len()];
    let mode = MODES[usize::from((*m >> 3) & 0x07) % MODES.len()];
    let status_only = *m & 0x40 != 0;
    let manager = (*m & 0x80 != 0).then_some("kubectl");
    let mut path = format!("{collection}/{name}");
    if status_only {
        path.push_str("/status");
    }
    match fuzzing::patch(&path, ctype, mode, manager, force, &live, body, status_only) {
        Ok(obj) => check_stored(&obj),
        Err(e) => check_error(&e, body),
    }
});
