//! A lab node's identity: a fresh bearer token for `system:node:<name>`,
//! accepted by the running API at once and kept in `tokens.csv` (so a
//! restarted server still accepts it), and the kubeconfig its agent reads.

use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use crate::api::auth::Authenticator;
use crate::identity::{self, Identity, TokenEntry};
use crate::kubeconfig;

/// Mints and revokes node credentials.
#[derive(Debug)]
pub struct Credentials {
    auth: Authenticator,
    tokens_file: PathBuf,
    ca_pem: String,
    cluster: String,
    server: String,
    /// tokens.csv is appended to and rewritten by concurrent creations
    /// and deletions.
    file: Mutex<()>,
}

impl Credentials {
    /// Credentials signed into `auth` and `<dir>/tokens.csv`, trusting
    /// `<dir>/ca.crt` (what `init` wrote in `dir`).
    pub fn new(
        auth: Authenticator,
        dir: &Path,
        cluster: &str,
        server: &str,
    ) -> Result<Credentials, String> {
        let ca = dir.join("ca.crt");
        let ca_pem = fs::read_to_string(&ca).map_err(|e| {
            format!(
                "reading {}: {e} (run `sluice-controller init`)",
                ca.display()
            )
        })?;
        Ok(Credentials {
            auth,
            tokens_file: dir.join("tokens.csv"),
            ca_pem,
            cluster: cluster.to_string(),
            server: server.to_string(),
            file: Mutex::new(()),
        })
    }

    /// A new token for `node`: written to tokens.csv, accepted by the
    /// API, and in a kubeconfig at `kubeconfig` (mode 0600).
    pub fn mint(&self, node: &str, kubeconfig_path: &Path) -> Result<(), String> {
        let entry = TokenEntry {
            token: random_token()?,
            identity: Identity::Node { name: node.into() },
        };
        let text = kubeconfig::render(
            &self.cluster,
            &self.server,
            &self.ca_pem,
            &entry.identity.user(),
            &entry.token,
        );
        write_secret(kubeconfig_path, &text)?;
        {
            let _held = self.file.lock().unwrap_or_else(PoisonError::into_inner);
            let mut f = fs::OpenOptions::new()
                .append(true)
                .open(&self.tokens_file)
                .map_err(|e| format!("opening {}: {e}", self.tokens_file.display()))?;
            f.write_all(identity::render(std::slice::from_ref(&entry)).as_bytes())
                .and_then(|()| f.sync_all())
                .map_err(|e| format!("appending to {}: {e}", self.tokens_file.display()))?;
        }
        self.auth.add(&entry);
        Ok(())
    }

    /// Every token of `node`, out of the API and of tokens.csv (other
    /// lines are kept as they are, comments included).
    pub fn revoke(&self, node: &str) -> Result<(), String> {
        let who = Identity::Node { name: node.into() };
        self.auth.remove_identity(&who);
        let _held = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        let path = &self.tokens_file;
        let text =
            fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        let kept = without_identity(&text, &who);
        if kept.len() == text.len() {
            return Ok(());
        }
        write_secret(path, &kept)
    }
}

/// `text` (a token file) without the lines of `who`.
fn without_identity(text: &str, who: &Identity) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let theirs = identity::parse(line)
            .ok()
            .is_some_and(|es| es.iter().any(|e| &e.identity == who));
        if !theirs {
            out.push_str(line);
        }
    }
    out
}

fn random_token() -> Result<String, String> {
    let mut b = [0u8; 32];
    getrandom::getrandom(&mut b).map_err(|e| format!("random token: {e}"))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Write `text` to `path` whole or not at all, readable by root only.
fn write_secret(path: &Path, text: &str) -> Result<(), String> {
    let io = |e: std::io::Error| format!("writing {}: {e}", path.display());
    let tmp = path.with_extension("tmp");
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io)?;
    f.write_all(text.as_bytes()).map_err(io)?;
    f.sync_all().map_err(io)?;
    fs::rename(&tmp, path).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mint_then_revoke_round_trips_the_file_and_the_api() {
        let dir = std::env::temp_dir().join(format!("sluice-creds-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("dir");
        let admin = format!(
            "# the admin\n{},admin,admin,\"system:masters\"\n",
            "a".repeat(32)
        );
        fs::write(dir.join("tokens.csv"), &admin).expect("tokens");
        fs::write(dir.join("ca.crt"), "PEM").expect("ca");
        let auth = Authenticator::new(&identity::parse(&admin).expect("parse"));
        let c = Credentials::new(auth.clone(), &dir, "sluice", "https://198.18.0.2:6443")
            .expect("credentials");

        let kc = dir.join("n1.kubeconfig");
        c.mint("n1", &kc).expect("mint");
        let text = fs::read_to_string(&kc).expect("kubeconfig");
        let v: serde_yaml::Value = serde_yaml::from_str(&text).expect("yaml");
        let token = v["users"][0]["user"]["token"]
            .as_str()
            .expect("token")
            .to_string();
        assert_eq!(v["users"][0]["name"], "system:node:n1");
        assert_eq!(
            v["clusters"][0]["cluster"]["server"],
            "https://198.18.0.2:6443"
        );
        let header = format!("Bearer {token}");
        let n1 = Identity::Node { name: "n1".into() };
        assert_eq!(auth.identify(Some(&header)), Some(n1.clone()));
        let file = fs::read_to_string(dir.join("tokens.csv")).expect("tokens");
        let entries = identity::parse(&file).expect("still a token file");
        assert!(entries.iter().any(|e| e.token == token && e.identity == n1));

        c.mint("n2", &dir.join("n2.kubeconfig")).expect("mint n2");
        c.revoke("n1").expect("revoke");
        assert_eq!(auth.identify(Some(&header)), None);
        let file = fs::read_to_string(dir.join("tokens.csv")).expect("tokens");
        assert!(
            file.starts_with(&admin),
            "comments and other lines kept: {file}"
        );
        assert!(!file.contains("system:node:n1,"), "{file}");
        assert!(file.contains("system:node:n2,"), "{file}");
        c.revoke("n1").expect("revoking twice is fine");
        let _ = fs::remove_dir_all(&dir);
    }
}
