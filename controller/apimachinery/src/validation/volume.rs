//! A pod's volumes (`ValidateVolumes`): names, exactly one source, and
//! the rules of the sources pods here use (configMap, secret, emptyDir,
//! hostPath, persistentVolumeClaim).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{KeyToPath, Volume};
use serde_json::Value;

use super::container::quantity_value;
use super::field::{Error, ErrorList, Path};
use super::meta::invalid_each;
use super::names;

/// Upstream's order of volume sources: the second one set is the one
/// named in "may not specify more than 1 volume type".
const SOURCES: [&str; 29] = [
    "hostPath",
    "emptyDir",
    "gitRepo",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "flocker",
    "persistentVolumeClaim",
    "rbd",
    "cinder",
    "cephfs",
    "quobyte",
    "downwardAPI",
    "fc",
    "azureFile",
    "vsphereVolume",
    "photonPersistentDisk",
    "portworxVolume",
    "azureDisk",
    "storageos",
    "configMap",
    "scaleIO",
    "projected",
    "csi",
    "ephemeral",
    "image",
];

const MODE: &str = "must be a number between 0 and 0777 (octal), both inclusive";

fn mode(errs: &mut ErrorList, path: &Path, m: Option<i32>) {
    if let Some(m) = m.filter(|m| !(0..=0o777).contains(m)) {
        errs.push(Error::invalid(path, m, MODE));
    }
}

/// `validateVolumeSourcePath`: relative, no `..`.
fn relative_path(errs: &mut ErrorList, path: &Path, p: &str) {
    if p.starts_with('/') {
        errs.push(Error::invalid(path, p, "must be a relative path"));
    }
    if p.split('/').any(|s| s == "..") {
        errs.push(Error::invalid(path, p, "must not contain '..'"));
    }
    if p.starts_with("..") {
        errs.push(Error::invalid(path, p, "must not start with '..'"));
    }
}

fn items(errs: &mut ErrorList, path: &Path, items: &[KeyToPath]) {
    for (j, it) in items.iter().enumerate() {
        let at = path.child("items").index(j);
        if it.key.is_empty() {
            errs.push(Error::required(&at.child("key"), ""));
        }
        if it.path.is_empty() {
            errs.push(Error::required(&at.child("path"), ""));
        } else {
            relative_path(errs, &at.child("path"), &it.path);
        }
        mode(errs, &at.child("mode"), it.mode);
    }
}

fn source(v: &Volume, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let set: Vec<&str> = match serde_json::to_value(v) {
        Ok(Value::Object(m)) => SOURCES
            .iter()
            .copied()
            .filter(|s| m.get(*s).is_some_and(|x| !x.is_null()))
            .collect(),
        _ => Vec::new(),
    };
    let Some(first) = set.first() else {
        errs.push(Error::required(path, "must specify a volume type"));
        return errs;
    };
    for extra in &set[1..] {
        errs.push(Error::forbidden(
            &path.child(extra),
            "may not specify more than 1 volume type",
        ));
    }
    match *first {
        "hostPath" => {
            if let Some(h) = &v.host_path {
                let p = path.child("hostPath");
                if h.path.is_empty() {
                    errs.push(Error::required(&p.child("path"), ""));
                } else if h.path.split('/').any(|s| s == "..") {
                    errs.push(Error::invalid(
                        &p.child("path"),
                        h.path.as_str(),
                        "must not contain '..'",
                    ));
                }
                const TYPES: [&str; 8] = [
                    "",
                    "BlockDevice",
                    "CharDevice",
                    "Directory",
                    "DirectoryOrCreate",
                    "File",
                    "FileOrCreate",
                    "Socket",
                ];
                if let Some(t) = h.type_.as_deref().filter(|t| !TYPES.contains(t)) {
                    errs.push(Error::not_supported(&p.child("type"), t, &TYPES));
                }
            }
        }
        "emptyDir" => {
            let limit = v.empty_dir.as_ref().and_then(|e| e.size_limit.as_ref());
            if limit.and_then(quantity_value).is_some_and(|l| l < 0.0) {
                errs.push(Error::forbidden(
                    &path.child("emptyDir").child("sizeLimit"),
                    "SizeLimit field must be a valid resource quantity",
                ));
            }
        }
        "secret" => {
            if let Some(s) = &v.secret {
                let p = path.child("secret");
                if s.secret_name.as_deref().unwrap_or_default().is_empty() {
                    errs.push(Error::required(&p.child("secretName"), ""));
                }
                mode(&mut errs, &p.child("defaultMode"), s.default_mode);
                items(&mut errs, &p, s.items.as_deref().unwrap_or_default());
            }
        }
        "configMap" => {
            if let Some(c) = &v.config_map {
                let p = path.child("configMap");
                if c.name.is_empty() {
                    errs.push(Error::required(&p.child("name"), ""));
                }
                mode(&mut errs, &p.child("defaultMode"), c.default_mode);
                items(&mut errs, &p, c.items.as_deref().unwrap_or_default());
            }
        }
        "persistentVolumeClaim" => {
            if let Some(c) = &v.persistent_volume_claim {
                if c.claim_name.is_empty() {
                    errs.push(Error::required(
                        &path.child("persistentVolumeClaim").child("claimName"),
                        "",
                    ));
                }
            }
        }
        _ => {}
    }
    errs
}

/// The volumes' errors, and the names of the good ones (mounts of any
/// other are `Not found`).
pub fn volumes(list: &[Volume], path: &Path) -> (ErrorList, BTreeSet<String>) {
    let mut errs = ErrorList::new();
    let mut good = BTreeSet::new();
    for (i, v) in list.iter().enumerate() {
        let at = path.index(i);
        let name = at.child("name");
        let mut el = source(v, &at);
        if v.name.is_empty() {
            el.push(Error::required(&name, ""));
        } else {
            invalid_each(&mut el, &name, &v.name, names::dns1123_label(&v.name));
        }
        if good.contains(&v.name) {
            el.push(Error::duplicate(&name, v.name.as_str()));
        }
        if el.is_empty() {
            good.insert(v.name.clone());
        } else {
            errs.extend(el);
        }
    }
    (errs, good)
}
