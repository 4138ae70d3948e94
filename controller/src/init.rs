//! `sluice-controller init`: the cluster's credentials, written once.
//!
//! ```text
//! <dir>/ca.crt ca.key                 the cluster CA
//! <dir>/apiserver.crt apiserver.key   the API server's serving certificate
//! <dir>/tokens.csv                    bearer tokens → identities (admin, nodes)
//! <dir>/admin.kubeconfig              for kubectl
//! <dir>/load-balancer.kubeconfig      for sluice-lb (reads its four kinds)
//! <dir>/nodes/<node>.kubeconfig       one per node, for its agent
//! ```
//!
//! Nothing is overwritten unless asked (a second `init` would otherwise
//! replace the CA every agent trusts); secrets are written 0600.

use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::identity::{self, is_dns_subdomain, Identity, TokenEntry};
use crate::{kubeconfig, pki};

#[derive(Debug, Clone, clap::Args)]
pub struct InitOptions {
    /// Where the files go.
    #[arg(long, default_value = "/etc/sluice/controller")]
    pub dir: PathBuf,
    /// The cluster's name (kubeconfig cluster and context names).
    #[arg(long, default_value = "sluice")]
    pub cluster: String,
    /// The URL clients use to reach the API server: `https://host:port`.
    #[arg(long, default_value = "https://127.0.0.1:6443")]
    pub server: String,
    /// Nodes to make a token and a kubeconfig for (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub nodes: Vec<String>,
    /// More names or addresses the serving certificate covers.
    #[arg(long = "san", value_delimiter = ',')]
    pub sans: Vec<String>,
    /// Replace existing files (a new CA: every kubeconfig changes).
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error(
        "--server {0:?}: expected https://<host>:<port> (kubectl sends tokens only over HTTPS)"
    )]
    Server(String),
    #[error("--nodes: {0:?} is not a valid node name (lowercase letters, digits, '-' and '.')")]
    NodeName(String),
    #[error("--nodes: {0:?} is listed twice")]
    DuplicateNode(String),
    #[error("--cluster: {0:?} is not a valid name (lowercase letters, digits, '-' and '.')")]
    Cluster(String),
    #[error("{0} exists; pass --force to replace every file init writes (agents will need their new kubeconfigs)")]
    Exists(PathBuf),
    #[error(transparent)]
    Pki(#[from] pki::PkiError),
    #[error("random tokens: {0}")]
    Random(String),
    #[error("writing {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The host part of an `https://host:port[/]` URL (brackets removed).
fn server_host(server: &str) -> Option<String> {
    let rest = server.strip_prefix("https://")?.trim_end_matches('/');
    if rest.contains('/') {
        return None;
    }
    let (host, port) = match rest.strip_prefix('[') {
        Some(r) => {
            let (h, p) = r.split_once("]:")?;
            (h, p)
        }
        None => rest.rsplit_once(':')?,
    };
    port.parse::<u16>().ok().filter(|p| *p != 0)?;
    (!host.is_empty()).then(|| host.to_string())
}

fn token() -> Result<String, InitError> {
    let mut b = [0u8; 32];
    getrandom::getrandom(&mut b).map_err(|e| InitError::Random(e.to_string()))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// What `init` writes, relative to its directory, and whether it is secret.
fn plan(opts: &InitOptions) -> Vec<(PathBuf, bool)> {
    let mut files = vec![
        (PathBuf::from("ca.crt"), false),
        (PathBuf::from("ca.key"), true),
        (PathBuf::from("apiserver.crt"), false),
        (PathBuf::from("apiserver.key"), true),
        (PathBuf::from("tokens.csv"), true),
        (PathBuf::from("admin.kubeconfig"), true),
        (PathBuf::from("load-balancer.kubeconfig"), true),
    ];
    for n in &opts.nodes {
        files.push((Path::new("nodes").join(format!("{n}.kubeconfig")), true));
    }
    files
}

fn write_file(path: &Path, text: &str, secret: bool) -> Result<(), InitError> {
    let io = |source| InitError::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(io)?;
    }
    let tmp = path.with_extension("init-tmp");
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(if secret { 0o600 } else { 0o644 })
        .open(&tmp)
        .map_err(io)?;
    f.write_all(text.as_bytes()).map_err(io)?;
    f.sync_all().map_err(io)?;
    fs::rename(&tmp, path).map_err(io)
}

/// Check everything, generate everything, then write: a refused `init`
/// writes nothing.
pub fn run(opts: &InitOptions) -> Result<Vec<PathBuf>, InitError> {
    let host = server_host(&opts.server).ok_or_else(|| InitError::Server(opts.server.clone()))?;
    if !is_dns_subdomain(&opts.cluster) {
        return Err(InitError::Cluster(opts.cluster.clone()));
    }
    for (i, n) in opts.nodes.iter().enumerate() {
        if !is_dns_subdomain(n) {
            return Err(InitError::NodeName(n.clone()));
        }
        if opts.nodes[..i].contains(n) {
            return Err(InitError::DuplicateNode(n.clone()));
        }
    }
    let files = plan(opts);
    if !opts.force {
        if let Some((p, _)) = files.iter().find(|(p, _)| opts.dir.join(p).exists()) {
            return Err(InitError::Exists(opts.dir.join(p)));
        }
    }
    let mut sans = vec![host];
    sans.extend(opts.sans.iter().cloned());
    let pki = pki::generate(&opts.cluster, &sans)?;
    let mut entries = vec![TokenEntry {
        token: token()?,
        identity: Identity::Admin {
            user: "admin".into(),
        },
    }];
    // In `plan`'s order: admin, the load balancer, then the nodes.
    entries.push(TokenEntry {
        token: token()?,
        identity: Identity::LoadBalancer,
    });
    for n in &opts.nodes {
        entries.push(TokenEntry {
            token: token()?,
            identity: Identity::Node { name: n.clone() },
        });
    }
    let kubeconfig_of = |e: &TokenEntry| {
        kubeconfig::render(
            &opts.cluster,
            opts.server.trim_end_matches('/'),
            &pki.ca_cert,
            &e.identity.user(),
            &e.token,
        )
    };
    let mut texts = vec![
        pki.ca_cert.clone(),
        pki.ca_key.clone(),
        pki.server_cert.clone(),
        pki.server_key.clone(),
        identity::render(&entries),
    ];
    texts.extend(entries.iter().map(kubeconfig_of));
    let mut written = Vec::new();
    for ((rel, secret), text) in files.iter().zip(texts) {
        let path = opts.dir.join(rel);
        write_file(&path, &text, *secret)?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_urls() {
        assert_eq!(
            server_host("https://127.0.0.1:6443"),
            Some("127.0.0.1".into())
        );
        assert_eq!(server_host("https://[::1]:6443/"), Some("::1".into()));
        assert_eq!(
            server_host("https://api.local:443"),
            Some("api.local".into())
        );
        for bad in [
            "http://x:1",
            "https://x",
            "https://x:0",
            "https://x:1/api",
            "https://:1",
        ] {
            assert_eq!(server_host(bad), None, "{bad}");
        }
    }
}
