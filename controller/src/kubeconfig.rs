//! kubeconfig files as `kubectl` and kube-rs read them: one cluster (the
//! server's URL and the CA, inline), one user (a bearer token), one
//! context, current.

use serde::Serialize;

#[derive(Serialize)]
struct Kubeconfig<'a> {
    #[serde(rename = "apiVersion")]
    api_version: &'a str,
    kind: &'a str,
    clusters: Vec<Named<'a, Cluster<'a>>>,
    users: Vec<Named<'a, User<'a>>>,
    contexts: Vec<Named<'a, Context<'a>>>,
    #[serde(rename = "current-context")]
    current_context: &'a str,
    preferences: std::collections::BTreeMap<String, String>,
}

#[derive(Serialize)]
struct Named<'a, T> {
    name: &'a str,
    #[serde(flatten)]
    item: T,
}

#[derive(Serialize)]
struct Cluster<'a> {
    cluster: ClusterInfo<'a>,
}

#[derive(Serialize)]
struct ClusterInfo<'a> {
    server: &'a str,
    #[serde(rename = "certificate-authority-data")]
    ca_data: String,
}

#[derive(Serialize)]
struct User<'a> {
    user: UserInfo<'a>,
}

#[derive(Serialize)]
struct UserInfo<'a> {
    token: &'a str,
}

#[derive(Serialize)]
struct Context<'a> {
    context: ContextInfo<'a>,
}

#[derive(Serialize)]
struct ContextInfo<'a> {
    cluster: &'a str,
    user: &'a str,
}

/// The kubeconfig of `user` with `token` for the cluster at `server`.
pub fn render(cluster: &str, server: &str, ca_pem: &str, user: &str, token: &str) -> String {
    let context = format!("{user}@{cluster}");
    let k = Kubeconfig {
        api_version: "v1",
        kind: "Config",
        clusters: vec![Named {
            name: cluster,
            item: Cluster {
                cluster: ClusterInfo {
                    server,
                    ca_data: base64(ca_pem.as_bytes()),
                },
            },
        }],
        users: vec![Named {
            name: user,
            item: User {
                user: UserInfo { token },
            },
        }],
        contexts: vec![Named {
            name: &context,
            item: Context {
                context: ContextInfo { cluster, user },
            },
        }],
        current_context: &context,
        preferences: Default::default(),
    };
    // Serialising these plain structs cannot fail; an empty file would be
    // caught by the first kubectl call anyway.
    serde_yaml::to_string(&k).unwrap_or_default()
}

/// Standard base64 with padding (what kubeconfig's `-data` fields hold).
pub fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        for (i, o) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(i.as_bytes()), o);
        }
    }

    #[test]
    fn one_cluster_user_and_current_context() {
        let text = render("sluice", "https://127.0.0.1:6443", "PEM", "admin", "tok");
        let v: serde_yaml::Value = serde_yaml::from_str(&text).expect("yaml");
        assert_eq!(v["current-context"], "admin@sluice");
        assert_eq!(
            v["clusters"][0]["cluster"]["server"],
            "https://127.0.0.1:6443"
        );
        assert_eq!(
            v["clusters"][0]["cluster"]["certificate-authority-data"],
            "UEVN"
        );
        assert_eq!(v["users"][0]["name"], "admin");
        assert_eq!(v["users"][0]["user"]["token"], "tok");
        assert_eq!(v["contexts"][0]["context"]["user"], "admin");
    }
}
