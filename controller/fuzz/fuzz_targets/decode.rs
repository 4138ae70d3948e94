//! The request decoder: a create's body (JSON or YAML, any bytes) through
//! `decode_body`, the metadata rules and `fieldValidation` into the object
//! the server would store; and the same body as a delete's
//! `DeleteOptions`.
//!
//! Input: byte 0 picks the resource; byte 1 the content type (bits 0-2),
//! the `fieldValidation` mode (bits 3-5) and whether the delete also has
//! `?gracePeriodSeconds` (bit 7); the rest is the body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_apiserver::fuzzing;
use sluice_controller_fuzz::{check_error, check_stored, collection, MODES};

const CTYPES: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/json; charset=utf-8",
];

fuzz_target!(|data: &[u8]| {
    let [r, m, body @ ..] = data else {
        return;
    };
    let path = collection(*r);
    let ctype = CTYPES[usize::from(*m & 0x07) % CTYPES.len()];
    let mode = MODES[usize::from((*m >> 3) & 0x07) % MODES.len()];
    match fuzzing::create(&path, ctype, mode, body) {
        Ok(obj) => check_stored(&obj),
        Err(e) => check_error(&e, body),
    }
    let grace = (*m & 0x80 != 0).then_some("30");
    if let Err(e) = fuzzing::delete_options(ctype, body, grace) {
        check_error(&e, body);
    }
});
